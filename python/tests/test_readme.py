"""The README's Python script runs as written."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests import _util


class ReadmeTest(unittest.TestCase):
    def test_readme_script(self):
        _util.need_binary()
        readme = os.path.join(os.path.dirname(_util.PYROOT), "README.md")
        if not os.path.exists(readme):
            self.skipTest("no README.md beside python/")
        blocks = re.findall(r"```python\n(.*?)```", _util.read(readme), re.S)
        self.assertTrue(blocks, "README.md has no python block")
        d = tempfile.mkdtemp(prefix="ctrkit-readme-")
        try:
            env = dict(os.environ, PYTHONPATH=_util.PYROOT)
            p = subprocess.run([sys.executable, "-c", blocks[0]], cwd=d, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn("Iter: 40 ", p.stdout)
            self.assertTrue(os.path.exists(os.path.join(d, "dnn.json")))
            _util.ctrkit("summary", "--config", os.path.join(d, "dnn.json"))
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
