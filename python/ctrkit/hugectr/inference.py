"""hugectr.inference: InferenceParams and InferenceModel on `ctrkit
predict` and `ctrkit evaluate`."""

import copy
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

# InferenceParams' further arguments (HugeCTR v23.09 hps_wrapper.hpp, in
# order, with HugeCTR's defaults), by what ctrkit does with them.
_HPS_ARGS = [
    ("use_algorithm_search", True), ("use_cuda_graph", True), ("number_of_worker_buffers_in_pool", 2),
    ("number_of_refresh_buffers_in_pool", 1), ("thread_pool_size", 16), ("cache_refresh_percentage_per_iteration", 0.0),
    ("deployed_devices", [0]), ("default_value_for_each_table", [0.0]), ("volatile_db", None), ("persistent_db", None),
    ("update_source", None), ("maxnum_des_feature_per_sample", 26), ("refresh_delay", 0.0), ("refresh_interval", 0.0),
    ("maxnum_catfeature_query_per_table_per_sample", [26]), ("embedding_vecsize_per_table", [128]),
    ("embedding_table_names", [""]), ("network_file", ""), ("label_dim", 1), ("slot_num", 10),
    ("non_trainable_params_file", ""), ("use_static_table", False), ("embedding_cache_type", None),
    ("use_context_stream", True), ("fuse_embedding_table", False), ("use_hctr_cache_implementation", True),
    ("init_ec", True), ("enable_pagelock", False), ("fp8_quant", False)]

# Settings of HugeCTR's GPU embedding cache, its parameter server and its
# CUDA scheduling: they change how fast HugeCTR answers, not what. ctrkit
# holds every table whole in memory (a cache that always hits), so its
# predictions are HugeCTR's whatever they say; they are checked, not used.
_SPEED_ONLY = {"use_algorithm_search", "use_cuda_graph", "number_of_worker_buffers_in_pool",
               "number_of_refresh_buffers_in_pool", "thread_pool_size", "cache_refresh_percentage_per_iteration",
               "refresh_delay", "refresh_interval", "use_static_table", "embedding_cache_type", "use_context_stream",
               "fuse_embedding_table", "use_hctr_cache_implementation", "init_ec", "enable_pagelock",
               "maxnum_des_feature_per_sample", "maxnum_catfeature_query_per_table_per_sample"}


def _number(name, v, lo=None, hi=None, integer=False):
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError("InferenceParams %s %r: want %s%s" % (
            name, v, "an integer" if integer else "a number",
            "" if lo is None else (" ≥ %s" % lo if hi is None else " in [%s, %s]" % (lo, hi))))


class InferenceParams(object):
    """HugeCTR's InferenceParams (v23.09 hps_wrapper.hpp; the arguments are
    described in HugeCTR's docs/source/hierarchical_parameter_server/
    hps_database_backend.md). Each is honoured or refused by name:

    * model_name, max_batchsize, dense_model_file, sparse_model_files,
      i64_input_key, use_mixed_precision and scaler, non_trainable_params_file
      (the BatchNorm running statistics; default <dense_model_file>.ntp.json,
      where save_params_to_files writes them), deployed_devices (the device
      InferenceModel runs on; max_batchsize must divide among them, as
      HugeCTR checks) set what ctrkit predicts with;
    * default_value_for_each_table: the vector of a key no table holds;
      ctrkit's is 0 (the default), other values are refused;
    * label_dim, slot_num, embedding_vecsize_per_table, embedding_table_names
      and network_file size and name HugeCTR's parameter-server buffers:
      InferenceModel checks them against the model graph when they are
      given;
    * the embedding-cache, parameter-server and scheduling settings
      (hit_rate_threshold, use_gpu_embedding_cache, cache_size_percentage,
      use_cuda_graph, thread_pool_size, …) change HugeCTR's speed, not its
      answers: checked, no effect (ctrkit's tables are whole in memory);
    * refused: volatile_db, persistent_db, update_source (HPS databases and
      Kafka updates) and fp8_quant=True (FP8 tables change the answers);
    * device_id is deprecated in HugeCTR, whose InferenceModel overwrites it
      with each of deployed_devices: a device_id other than 0 with the
      default deployed_devices is an error that says to use deployed_devices.
    """

    def __init__(self, model_name, max_batchsize, hit_rate_threshold, dense_model_file, sparse_model_files,
                 device_id=0, use_gpu_embedding_cache=_REQUIRED, cache_size_percentage=_REQUIRED,
                 i64_input_key=_REQUIRED, use_mixed_precision=False, scaler=1.0, *args, **kw):
        for name, v in (("use_gpu_embedding_cache", use_gpu_embedding_cache),
                        ("cache_size_percentage", cache_size_percentage), ("i64_input_key", i64_input_key)):
            if v is _REQUIRED:
                raise TypeError("InferenceParams: %s has no default (HugeCTR requires it)" % name)
        names = [n for n, _ in _HPS_ARGS]
        if len(args) > len(names):
            raise TypeError("InferenceParams takes at most %d arguments" % (11 + len(names)))
        given = dict(zip(names, args))
        for k, v in kw.items():
            if k not in names:
                raise TypeError("InferenceParams: unexpected argument %s" % k)
            if k in given:
                raise TypeError("InferenceParams: argument %s given twice" % k)
            given[k] = v
        _number("max_batchsize", max_batchsize, 1, integer=True)
        _number("hit_rate_threshold", hit_rate_threshold, 0)  # > 1 turns HugeCTR's async insertion off
        _number("cache_size_percentage", cache_size_percentage, 0, 1)
        _number("scaler", scaler, 0)
        _number("device_id", device_id, 0, integer=True)
        self.model_name = model_name
        self.max_batchsize = int(max_batchsize)
        self.hit_rate_threshold = hit_rate_threshold
        self.dense_model_file = dense_model_file
        self.sparse_model_files = list(sparse_model_files)
        self.device_id = device_id
        self.use_gpu_embedding_cache = bool(use_gpu_embedding_cache)
        self.cache_size_percentage = cache_size_percentage
        self.i64_input_key = bool(i64_input_key)
        self.use_mixed_precision = bool(use_mixed_precision)
        self.scaler = scaler
        for k, d in _HPS_ARGS:
            setattr(self, k, copy.deepcopy(given.get(k, d)))
        self._given = set(given)
        for k in ("volatile_db", "persistent_db", "update_source"):
            if self.__dict__[k] is not None:
                raise NotImplementedError("InferenceParams %s: ctrkit has no HPS databases or update sources; it "
                                          "reads dense_model_file and sparse_model_files whole" % k)
        if self.fp8_quant:
            raise NotImplementedError("InferenceParams fp8_quant=True: ctrkit predicts with the float32 tables "
                                      "(FP8 tables change the predictions)")
        dv = self.default_value_for_each_table
        if any(float(x) != 0.0 for x in (dv if isinstance(dv, (list, tuple)) else [dv])):
            raise NotImplementedError("InferenceParams default_value_for_each_table %r: a key no table holds "
                                      "gets a zero vector in ctrkit (the default [0.0])" % (dv,))
        dev = self.deployed_devices
        if not isinstance(dev, (list, tuple)) or not dev:
            raise ValueError("InferenceParams deployed_devices %r: want a non-empty list of GPU ids "
                             "(HugeCTR: deployed_devices cannot be empty)" % (dev,))
        for d in dev:
            _number("deployed_devices entry", d, 0, integer=True)
        self.deployed_devices = [int(d) for d in dev]
        if self.max_batchsize % len(dev):
            raise ValueError("InferenceParams max_batchsize %d: HugeCTR needs it divisible by the %d "
                             "deployed_devices" % (self.max_batchsize, len(dev)))
        if device_id and "deployed_devices" not in given:
            raise ValueError("InferenceParams device_id %d: HugeCTR's InferenceModel runs on deployed_devices and "
                             "overwrites device_id (deprecated); give deployed_devices=[%d]" % (device_id, device_id))
        for k in ("number_of_worker_buffers_in_pool", "number_of_refresh_buffers_in_pool", "thread_pool_size",
                  "maxnum_des_feature_per_sample"):
            _number(k, self.__dict__[k], 0, integer=True)
        for k in ("cache_refresh_percentage_per_iteration", "refresh_delay", "refresh_interval"):
            _number(k, self.__dict__[k], 0)
        _number("label_dim", self.label_dim, 1, integer=True)
        _number("slot_num", self.slot_num, 1, integer=True)


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
        embs = [l for l in self._graph["layers"][1:] if "sparse_embedding_hparam" in l]
        n = len(embs)
        if len(inference_params.sparse_model_files) != n:
            raise ValueError("InferenceParams sparse_model_files: %d files for the %d embeddings of %s"
                             % (len(inference_params.sparse_model_files), n, model_config_path))
        self._check_sizes(model_config_path, embs)
        self._dir = tempfile.mkdtemp(prefix="ctrkit-infer-")
        self._dense = os.path.abspath(inference_params.dense_model_file)
        ntp = inference_params.non_trainable_params_file
        if ntp and os.path.abspath(ntp) != self._dense + ".ntp.json":
            # ctrkit reads the BatchNorm statistics beside the dense file: put
            # the named file there under links.
            if not os.path.exists(ntp):
                raise FileNotFoundError("%s: no such file or directory (InferenceParams non_trainable_params_file)"
                                        % ntp)
            link = os.path.join(self._dir, os.path.basename(self._dense))
            os.symlink(self._dense, link)
            os.symlink(os.path.abspath(ntp), link + ".ntp.json")
            self._dense = link

    def _check_sizes(self, path, embs):
        """InferenceParams' buffer sizes and names, where given, against the
        graph (HugeCTR sizes its parameter server by them)."""
        p = self._p
        data = self._graph["layers"][0]
        lab = data.get("label", {}).get("label_dim", 1)
        lab = sum(lab) if isinstance(lab, list) else lab
        slots = sum(sp.get("slot_num", 0) for sp in data.get("sparse", []))
        g = p._given
        if "label_dim" in g and p.label_dim < lab:
            raise ValueError("InferenceParams label_dim %d: %s predicts %d values per sample" % (p.label_dim, path, lab))
        if "slot_num" in g and p.slot_num < slots:
            raise ValueError("InferenceParams slot_num %d: %s has %d slots" % (p.slot_num, path, slots))
        for k in ("embedding_vecsize_per_table", "embedding_table_names",
                  "maxnum_catfeature_query_per_table_per_sample"):
            if k in g and len(getattr(p, k)) != len(embs):
                raise ValueError("InferenceParams %s has %d entries for the %d embedding tables of %s"
                                 % (k, len(getattr(p, k)), len(embs), path))
        if "embedding_vecsize_per_table" in g:
            for e, v in zip(embs, p.embedding_vecsize_per_table):
                want = e["sparse_embedding_hparam"].get("embedding_vec_size", 0)
                if v < want:
                    raise ValueError("InferenceParams embedding_vecsize_per_table: %d for %s, whose vectors have %d "
                                     "values" % (v, e.get("top"), want))
        if p.network_file and not (os.path.exists(p.network_file) and os.path.samefile(p.network_file, path)):
            raise ValueError("InferenceParams network_file %s: InferenceModel reads the graph %s; name the same "
                             "file or leave network_file empty" % (p.network_file, path))

    def check_out_tensor(self, tensor_name):
        raise NotImplementedError("InferenceModel.check_out_tensor: ctrkit's predict does not copy out inner "
                                  "tensors; predict gives the model's outputs")

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
                       "dense_model_file": self._dense,
                       "sparse_model_file": [os.path.abspath(f) for f in p.sparse_model_files]}
        if p.use_mixed_precision:
            g["solver"]["mixed_precision"] = float(p.scaler)
        g.pop("optimizer", None)
        path = os.path.join(self._dir, "inference.json")
        with open(path, "w") as f:
            f.write(_dumps(g))
        return path

    def _device(self, command):
        """--device (and --gpus for several deployed_devices, when the
        binary's command has it: the answers are the same on one)."""
        d = os.environ.get("CTRKIT_DEVICE")
        dev = self._p.deployed_devices
        if not d:
            d = "gpu:%d" % dev[0] if "deployed_devices" in self._p._given else "auto"
        f = ["--device", d]
        if len(dev) > 1 and _proc.has_flag(command, "--gpus"):
            f += ["--gpus", ",".join(str(x) for x in dev)]
        return f

    @staticmethod
    def _read_args(data_source_params, reading_file_sequentially):
        from . import DataSourceParams
        if data_source_params is not None and not isinstance(data_source_params, DataSourceParams):
            raise TypeError("data_source_params: want a hugectr.data.DataSourceParams")
        if not reading_file_sequentially:
            raise NotImplementedError("reading_file_sequentially=False: ctrkit reads the files of the list in "
                                      "order, one after another (HugeCTR's True)")

    def predict(self, num_batches, source, data_reader_type, check_type, slot_size_array=None,
                data_source_params=None, reading_file_sequentially=True):
        """Scores of num_batches batches of max_batchsize samples of source:
        an array of shape (max_batchsize·num_batches, label_dim), looping
        over the data when it holds fewer samples (as HugeCTR does)."""
        self._read_args(data_source_params, reading_file_sequentially)
        cfg = self._config(source, data_reader_type, check_type, slot_size_array, num_batches)
        out = os.path.join(self._dir, "pred.txt")
        _proc.run(["predict", "--config", cfg] + self._device("predict") +
                  ["--max-eval-batches", str(int(num_batches)), "-o", out])
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
                 data_source_params=None, reading_file_sequentially=True):
        """The AUC over num_batches batches of max_batchsize samples of
        source (fewer when the data ends first)."""
        self._read_args(data_source_params, reading_file_sequentially)
        cfg = self._config(source, data_reader_type, check_type, slot_size_array, num_batches)
        r = json.loads(_proc.run(["evaluate", "--config", cfg] + self._device("evaluate") +
                                 ["--max-eval-batches", str(int(num_batches)), "--json"]))
        return r["auc"]
