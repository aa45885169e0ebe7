import json
import unittest

from tests import _util  # noqa: F401  (sys.path)
from ctrkit.hugectr._nljson import F32, dumps, format_float


class FormatFloatTest(unittest.TestCase):
    # trainer/graph/graph_test.go's cases: nlohmann 3.9's Grisu2 output.
    CASES = [(0.9, "0.8999999761581421"), (0.999, "0.9990000128746033"), (1e-7, "1.0000000116860974e-07"),
             (1e-5, "9.999999747378752e-06"), (0.5, "0.5"), (1, "1.0"), (24, "24.0"),
             (0.001, "0.0010000000474974513"), (0, "0.0"), (1024, "1024.0"), (-2.5, "-2.5"),
             (1e20, "1.0000000200408773e+20"), (123456789, "123456792.0"), (86.866, "86.86599731445313"),
             (1e-8, "9.99999993922529e-09"), (0.1, "0.10000000149011612"), (1e15, "999999986991104.0"),
             (1e16, "1.0000000272564224e+16"), (3.4028235e38, "3.4028234663852886e+38"),
             (1.4e-45, "1.401298464324817e-45")]

    def test_float32_values(self):
        for x, want in self.CASES:
            self.assertEqual(format_float(F32(x)), want, x)

    def test_grisu_not_shortest(self):
        # Grisu2 gives ...313 where the shortest round-trip digits end ...312.
        self.assertEqual(format_float(86.86599731445312), "86.86599731445313")
        self.assertEqual(repr(86.86599731445312), "86.86599731445312")

    def test_doubles_round_trip(self):
        for x in [1.3e11, 2.6e11, 0.01, 123.456, 5e-324, 1.7976931348623157e308, 2 ** 53 + 2.0]:
            self.assertEqual(float(format_float(x)), x)

    def test_dump_layout(self):
        self.assertEqual(dumps({"b": [1, {"z": True, "a": "x\n"}], "a": [], "c": {}}),
                         '{\n  "a": [],\n  "b": [\n    1,\n    {\n      "a": "x\\n",\n      "z": true\n    }\n  ],\n'
                         '  "c": {}\n}')
        self.assertEqual(json.loads(dumps({"k": F32(0.9)}))["k"], float(F32(0.9)))


if __name__ == "__main__":
    unittest.main()
