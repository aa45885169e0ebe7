"""hugectr.inference: InferenceParams and InferenceModel on `ctrkit
predict` and `ctrkit evaluate`."""

import json
import os
import shutil
import tempfile

from .. import _proc
from . import _enums
from ._enums import value as _ev
from ._nljson import dumps as _dumps

try:
    import numpy as _np
except ImportError:  # numpy is optional: lists of lists then
    _np = None

__all__ = ["InferenceParams", "InferenceModel"]

_REQUIRED = object()

# InferenceParams' further arguments (HugeCTR's HPS and cache settings):
# accepted with HugeCTR's defaults; they tune HugeCTR's parameter server,
# which ctrkit has not (it holds the whole model in memory).
_HPS_ARGS = {
    "use_algorithm_search": True, "use_cuda_graph": True, "number_of_worker_buffers_in_pool": 2,
    "number_of_refresh_buffers_in_pool": 1, "thread_pool_size": 16, "cache_refresh_percentage_per_iteration": 0.0,
    "deployed_devices": [0], "default_value_for_each_table": [0.0], "volatile_db": None, "persistent_db": None,
    "update_source": None, "maxnum_des_feature_per_sample": 26, "refresh_delay": 0.0, "refresh_interval": 0.0,
    "maxnum_catfeature_query_per_table_per_sample": [26], "embedding_vecsize_per_table": [128],
    "embedding_table_names": [""], "network_file": "", "label_dim": 1, "slot_num": 10,
    "non_trainable_params_file": "", "use_static_table": False, "embedding_cache_type": None,
    "use_context_stream": True, "fuse_embedding_table": False, "use_hctr_cache_implementation": True,
    "init_ec": True, "enable_pagelock": False, "fp8_quant": False}


class InferenceParams(object):
    """HugeCTR's InferenceParams (v23.09 hps_wrapper.hpp)."""

    def __init__(self, model_name, max_batchsize, hit_rate_threshold, dense_model_file, sparse_model_files,
                 device_id=0, use_gpu_embedding_cache=_REQUIRED, cache_size_percentage=_REQUIRED,
                 i64_input_key=_REQUIRED, use_mixed_precision=False, scaler=1.0, **kw):
        for name, v in (("use_gpu_embedding_cache", use_gpu_embedding_cache),
                        ("cache_size_percentage", cache_size_percentage), ("i64_input_key", i64_input_key)):
            if v is _REQUIRED:
                raise TypeError("InferenceParams: %s has no default (HugeCTR requires it)" % name)
        unknown = sorted(set(kw) - set(_HPS_ARGS))
        if unknown:
            raise TypeError("InferenceParams: unexpected argument %s" % ", ".join(unknown))
        if max_batchsize < 1:
            raise ValueError("InferenceParams max_batchsize %d < 1" % max_batchsize)
        self.model_name = model_name
        self.max_batchsize = int(max_batchsize)
        self.hit_rate_threshold = hit_rate_threshold
        self.dense_model_file = dense_model_file
        self.sparse_model_files = list(sparse_model_files)
        self.device_id = device_id
        self.use_gpu_embedding_cache = use_gpu_embedding_cache
        self.cache_size_percentage = cache_size_percentage
        self.i64_input_key = bool(i64_input_key)
        self.use_mixed_precision = bool(use_mixed_precision)
        self.scaler = scaler
        for k, d in _HPS_ARGS.items():
            setattr(self, k, kw.get(k, d))


class InferenceModel(object):
    """HugeCTR's InferenceModel: a graph JSON (graph_to_json's) and the
    trained files InferenceParams names."""

    def __init__(self, model_config_path, inference_params):
        if not isinstance(inference_params, InferenceParams):
            raise TypeError("InferenceModel: want a hugectr.inference.InferenceParams")
        with open(model_config_path) as f:
            try:
                self._graph = json.load(f)
            except ValueError as e:
                raise ValueError("%s: %s" % (model_config_path, e))
        if not isinstance(self._graph, dict) or not self._graph.get("layers"):
            raise ValueError("%s: not a model graph (no \"layers\")" % model_config_path)
        self._path = model_config_path
        self._p = inference_params
        for f in [inference_params.dense_model_file] + inference_params.sparse_model_files:
            if not os.path.exists(f):
                raise FileNotFoundError("%s: no such file or directory (InferenceParams)" % f)
        n = sum(1 for l in self._graph["layers"][1:] if "sparse_embedding_hparam" in l)
        if len(inference_params.sparse_model_files) != n:
            raise ValueError("InferenceParams sparse_model_files: %d files for the %d embeddings of %s"
                             % (len(inference_params.sparse_model_files), n, model_config_path))
        self._dir = tempfile.mkdtemp(prefix="ctrkit-infer-")

    def __del__(self):
        shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)

    def _config(self, source, data_reader_type, check_type, slot_size_array, num_batches):
        fmt = _ev(data_reader_type, _enums.DataReaderType_t, "data_reader_type")
        chk = _ev(check_type, _enums.Check_t, "check_type")
        if num_batches < 1:
            raise ValueError("num_batches %d < 1" % num_batches)
        g = json.loads(json.dumps(self._graph))
        data = {k: v for k, v in g["layers"][0].items() if k in ("type", "label", "dense", "sparse", "name")}
        data.update({"format": fmt, "eval_source": source, "check": chk})
        if slot_size_array:
            data["slot_size_array"] = [int(x) for x in slot_size_array]
        g["layers"][0] = data
        p = self._p
        g["solver"] = {"batchsize": p.max_batchsize, "batchsize_eval": p.max_batchsize,
                       "max_eval_batches": int(num_batches), "input_key_type": "I64" if p.i64_input_key else "I32",
                       "dense_model_file": os.path.abspath(p.dense_model_file),
                       "sparse_model_file": [os.path.abspath(f) for f in p.sparse_model_files]}
        if p.use_mixed_precision:
            g["solver"]["mixed_precision"] = float(p.scaler)
        g.pop("optimizer", None)
        path = os.path.join(self._dir, "inference.json")
        with open(path, "w") as f:
            f.write(_dumps(g))
        return path

    def _device(self):
        d = os.environ.get("CTRKIT_DEVICE")
        if d:
            return d
        return "gpu:%d" % self._p.device_id if self._p.device_id else "auto"

    def predict(self, num_batches, source, data_reader_type, check_type, slot_size_array=None,
                data_source_params=None, reader_type=None):
        """Scores of num_batches batches of max_batchsize samples of source:
        an array of shape (max_batchsize·num_batches, label_dim), looping
        over the data when it holds fewer samples (as HugeCTR does)."""
        cfg = self._config(source, data_reader_type, check_type, slot_size_array, num_batches)
        out = os.path.join(self._dir, "pred.txt")
        _proc.run(["predict", "--config", cfg, "--device", self._device(), "--max-eval-batches", str(int(num_batches)),
                   "-o", out])
        with open(out) as f:
            rows = [[float(x) for x in line.split()] for line in f if line.strip()]
        want = self._p.max_batchsize * int(num_batches)
        if not rows:
            raise ValueError("%s: no samples to predict" % source)
        while len(rows) < want:
            rows.extend(rows[:want - len(rows)])
        rows = rows[:want]
        if _np is not None:
            return _np.array(rows, dtype=_np.float32)
        return rows

    def evaluate(self, num_batches, source, data_reader_type, check_type, slot_size_array=None,
                 data_source_params=None, reader_type=None):
        """The AUC over num_batches batches of max_batchsize samples of
        source (fewer when the data ends first)."""
        cfg = self._config(source, data_reader_type, check_type, slot_size_array, num_batches)
        r = json.loads(_proc.run(["evaluate", "--config", cfg, "--device", self._device(), "--max-eval-batches",
                                  str(int(num_batches)), "--json"]))
        return r["auc"]
