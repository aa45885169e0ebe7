"""HugeCTR's Python API on ctrkit: a HugeCTR training script runs with one
changed import,

    import ctrkit.hugectr as hugectr

The model graph is built here as HugeCTR's JSON (graph_to_json writes the
bytes HugeCTR writes); Model.fit runs `ctrkit train`, and the low-level API
(start_data_reading, train, eval, ...) drives one long-lived
`ctrkit session` process (docs/SESSION.md), so the model stays on the
device between calls. Argument names and defaults are HugeCTR v23.09's
(HugeCTR/include/pybind/*.hpp).
"""

import atexit
import copy
import datetime
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time

from .. import _proc
from .._proc import CtrkitError
from . import _enums
from ._enums import *  # noqa: F401,F403  (HugeCTR's enums)
from ._enums import value as _ev
from ._nljson import F32, dumps as _dumps  # noqa: F401  (F32: float32 values)

__version__ = "23.9.0"

__all__ = _enums.ALL + [
    "CtrkitError", "CreateSolver", "Solver", "CreateETC", "CreateHMemCache", "AsyncParam", "HybridEmbeddingParam", "DataReaderParams",
    "DataReaderSparseParam", "DataSourceParams", "CreateOptimizer", "OptParamsPy", "Input", "SparseEmbedding",
    "DenseLayer", "DenseLayerComputeConfig", "GroupDenseLayer", "Model", "LearningRateScheduler", "DataReader",
    "DataReader32", "DataReader64", "EmbeddingTrainingCache",
    "data", "inference", "tools"]


def _device():
    return os.environ.get("CTRKIT_DEVICE", "auto")


def _log(msg):
    now = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    print("[HCTR][%s][INFO][RK0][main]: %s" % (now, msg))
    sys.stdout.flush()


# ---------------------------------------------------------------- solver

class Solver(object):
    """What CreateSolver returns (its arguments, read-only by convention)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "Solver(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))


def CreateSolver(model_name="", seed=0, lr_policy=_enums.LrPolicy_t.fixed, lr=0.001, warmup_steps=1,
                 decay_start=0, decay_steps=1, decay_power=2.0, end_lr=0.0, max_eval_batches=100,
                 batchsize_eval=2048, batchsize=2048, vvgpu=None, repeat_dataset=True,
                 use_mixed_precision=False, enable_tf32_compute=False, scaler=1.0, metrics_spec=None,
                 i64_input_key=False, use_algorithm_search=True, use_cuda_graph=True, gen_loss_summary=True,
                 train_intra_iteration_overlap=False, train_inter_iteration_overlap=False,
                 eval_intra_iteration_overlap=False, eval_inter_iteration_overlap=False,
                 device_layout=_enums.DeviceLayout.LocalFirst, use_embedding_collection=False,
                 all_reduce_algo=_enums.AllReduceAlgo.NCCL, grouped_all_reduce=False,
                 num_iterations_statistics=20, perf_logging=False, drop_incomplete_batch=True,
                 kafka_brockers="", training_callbacks=None, ctrkit_precision=None):
    """HugeCTR's CreateSolver. ctrkit runs on one device: a vvgpu of more
    GPUs gives each embedding the capacity of all of them (as the JSON
    config's solver.gpu does).

    ctrkit_precision (a ctrkit extension, docs/PRECISION.md) picks the
    arithmetic by name: "fp32", "tf32", "fp16" or "bf16"; None (the
    default) follows use_mixed_precision (fp16 with scaler as the loss
    scale) and enable_tf32_compute as HugeCTR does. "bf16" trains in
    bfloat16 without loss scaling unless scaler is given (≠ 1)."""
    _ev(lr_policy, _enums.LrPolicy_t, "lr_policy")
    _ev(device_layout, _enums.DeviceLayout, "device_layout")
    _ev(all_reduce_algo, _enums.AllReduceAlgo, "all_reduce_algo")
    if vvgpu is None:
        vvgpu = [[0]]
    if metrics_spec is None:
        metrics_spec = {_enums.MetricsType.AUC: 1.0}
    for k in metrics_spec:
        _ev(k, _enums.MetricsType, "metrics_spec")
        if k.name not in ("AUC", "AverageLoss", "HitRate"):
            raise ValueError("metrics_spec: ctrkit computes AUC, AverageLoss and HitRate; %s is not among them" % k.name)
    if use_embedding_collection:
        raise NotImplementedError("use_embedding_collection: ctrkit has no EmbeddingCollection; "
                                  "use hugectr.SparseEmbedding (DistributedSlot/LocalizedSlot) layers")
    if kafka_brockers:
        raise NotImplementedError("kafka_brockers: ctrkit does not stream models to Kafka; "
                                  "save them with Model.save_params_to_files")
    if training_callbacks:
        raise NotImplementedError("training_callbacks: ctrkit's fit takes none; "
                                  "use the low-level loop (Model.train, Model.eval) for custom steps")
    if ctrkit_precision is not None:
        if ctrkit_precision not in ("fp32", "tf32", "fp16", "bf16"):
            raise ValueError("ctrkit_precision=%r: want 'fp32', 'tf32', 'fp16' or 'bf16'" % (ctrkit_precision,))
        implied = "fp16" if use_mixed_precision else "tf32" if enable_tf32_compute else None
        if implied is not None and implied != ctrkit_precision:
            raise ValueError("ctrkit_precision=%r and %s=True disagree: give one of them" % (
                ctrkit_precision, "use_mixed_precision" if use_mixed_precision else "enable_tf32_compute"))
        use_mixed_precision = use_mixed_precision or ctrkit_precision == "fp16"
        enable_tf32_compute = enable_tf32_compute or ctrkit_precision == "tf32"
    return Solver(model_name=model_name, seed=seed, lr_policy=lr_policy, lr=lr, warmup_steps=warmup_steps,
                  decay_start=decay_start, decay_steps=decay_steps, decay_power=decay_power, end_lr=end_lr,
                  max_eval_batches=max_eval_batches, batchsize_eval=batchsize_eval, batchsize=batchsize,
                  vvgpu=[list(v) for v in vvgpu], repeat_dataset=repeat_dataset,
                  use_mixed_precision=use_mixed_precision, enable_tf32_compute=enable_tf32_compute,
                  ctrkit_precision=ctrkit_precision,
                  scaler=scaler, metrics_spec=dict(metrics_spec), i64_input_key=i64_input_key,
                  use_algorithm_search=use_algorithm_search, use_cuda_graph=use_cuda_graph,
                  gen_loss_summary=gen_loss_summary,
                  train_intra_iteration_overlap=train_intra_iteration_overlap,
                  train_inter_iteration_overlap=train_inter_iteration_overlap,
                  eval_intra_iteration_overlap=eval_intra_iteration_overlap,
                  eval_inter_iteration_overlap=eval_inter_iteration_overlap, device_layout=device_layout,
                  use_embedding_collection=use_embedding_collection, all_reduce_algo=all_reduce_algo,
                  grouped_all_reduce=grouped_all_reduce, num_iterations_statistics=num_iterations_statistics,
                  perf_logging=perf_logging, drop_incomplete_batch=drop_incomplete_batch)


def CreateHMemCache(num_blocks, target_hit_rate, max_num_evict):
    """HugeCTR's host-memory cache of the Embedding Training Cache, which is
    not in ctrkit (CreateETC says what ctrkit offers instead)."""
    CreateETC(None)


def CreateETC(ps_types, sparse_models=None, local_paths=None, hmem_cache_configs=None):
    """HugeCTR's Embedding Training Cache (v23.09
    embedding_training_cache_wrapper.hpp) is not in ctrkit."""
    raise NotImplementedError(
        "CreateETC: ctrkit has no Embedding Training Cache (HugeCTR deprecated it). ctrkit keeps each "
        "embedding table whole in host or GPU memory: give SparseEmbedding a workspace_size_per_gpu_in_mb "
        "large enough, continue training from saved files with Model.load_sparse_weights / "
        "load_sparse_optimizer_states, and train over several file lists with Model.set_source")


# ---------------------------------------------------------------- reader

class AsyncParam(object):
    """HugeCTR's AsyncParam (the RawAsync reader's settings)."""

    def __init__(self, num_threads, num_batches_per_thread, max_num_requests_per_thread=0, io_depth=0,
                 io_alignment=0, shuffle=False, aligned_type=_enums.Alignment_t.Non, multi_hot_reader=True,
                 is_dense_float=True):
        _ev(aligned_type, _enums.Alignment_t, "aligned_type")
        for name, v, lo in (("num_threads", num_threads, 1), ("num_batches_per_thread", num_batches_per_thread, 1),
                            ("max_num_requests_per_thread", max_num_requests_per_thread, 0),
                            ("io_depth", io_depth, 0), ("io_alignment", io_alignment, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError("AsyncParam %s %r: want an integer ≥ %d" % (name, v, lo))
        self.num_threads = num_threads
        self.num_batches_per_thread = num_batches_per_thread
        self.max_num_requests_per_thread = max_num_requests_per_thread
        self.io_depth = io_depth
        self.io_alignment = io_alignment
        self.shuffle = shuffle
        self.aligned_type = aligned_type
        self.multi_hot_reader = multi_hot_reader
        self.is_dense_float = is_dense_float


class DataSourceParams(object):
    """HugeCTR's hugectr.data.DataSourceParams(source, server, port)
    (v23.09 data_source_wrapper.hpp; also hugectr.DataSourceParams here):
    ctrkit reads local files only."""

    def __init__(self, source=_enums.FileSystemType_t.Local, server="localhost", port=9000):
        _ev(source, _enums.FileSystemType_t, "source")
        if source is not _enums.FileSystemType_t.Local:
            raise NotImplementedError("DataSourceParams source %s: ctrkit reads local files only "
                                      "(copy the data to a local disk)" % source.name)
        self.source, self.server, self.port = source, server, port


def _strs(v, what):
    if isinstance(v, str):
        return [v]
    v = list(v)
    for s in v:
        if not isinstance(s, str):
            raise TypeError("%s: want a string or a list of strings, have %r" % (what, s))
    return v


class DataReaderParams(object):
    """HugeCTR's DataReaderParams."""

    def __init__(self, data_reader_type, source, keyset=None, eval_source="", check_type=_enums.Check_t.Sum,
                 cache_eval_data=0, num_samples=0, eval_num_samples=0, float_label_dense=False,
                 read_file_sequentially=False, num_workers=12, slot_size_array=None, data_source_params=None,
                 async_param=None):
        _ev(data_reader_type, _enums.DataReaderType_t, "data_reader_type")
        _ev(check_type, _enums.Check_t, "check_type")
        if keyset:
            raise NotImplementedError("keyset: keyset files serve HugeCTR's Embedding Training Cache, which ctrkit "
                                      "has not (see hugectr.CreateETC)")
        if not isinstance(eval_source, str):
            raise TypeError("eval_source: want a string (a file list, or a Raw file), have %r" % (eval_source,))
        if data_source_params is not None and not isinstance(data_source_params, DataSourceParams):
            raise TypeError("data_source_params: want a hugectr.DataSourceParams")
        if num_workers < 1:
            raise ValueError("num_workers %d: want at least 1" % num_workers)
        self.data_reader_type = data_reader_type
        self.source = _strs(source, "source")
        self.keyset = keyset or []
        self.eval_source = eval_source
        self.check_type = check_type
        self.cache_eval_data = cache_eval_data
        self.num_samples = num_samples
        self.eval_num_samples = eval_num_samples
        self.float_label_dense = float_label_dense
        self.read_file_sequentially = read_file_sequentially  # ctrkit reads the files in list order
        self.num_workers = num_workers
        self.slot_size_array = [int(x) for x in (slot_size_array or [])]
        self.data_source_params = data_source_params or DataSourceParams()
        self.async_param = async_param if async_param is not None else AsyncParam(
            16, 4, 512000, 4, 512, False, _enums.Alignment_t.Non, False, False)


class DataReaderSparseParam(object):
    """HugeCTR's DataReaderSparseParam: one sparse input."""

    def __init__(self, top_name, nnz_per_slot, is_fixed_length, slot_num):
        if slot_num < 1:
            raise ValueError("DataReaderSparseParam %s: slot_num %d < 1" % (top_name, slot_num))
        if isinstance(nnz_per_slot, int):
            nnz = [nnz_per_slot] * slot_num
        else:
            nnz = [int(x) for x in nnz_per_slot]
            if len(nnz) != slot_num:
                raise ValueError("DataReaderSparseParam %s: nnz_per_slot.size() != slot_num (%d != %d)"
                                 % (top_name, len(nnz), slot_num))
        self.top_name = top_name
        self.nnz_per_slot = nnz
        self.is_fixed_length = bool(is_fixed_length)
        self.slot_num = slot_num


# ---------------------------------------------------------------- optimizer

class OptParamsPy(object):
    """What CreateOptimizer returns."""

    def __init__(self, optimizer_type, update_type, hyperparams):
        self.optimizer = optimizer_type
        self.update_type = update_type
        self.hyperparams = hyperparams

    def _json(self):
        t = self.optimizer.value
        h = self.hyperparams
        o = {"type": t, "update_type": self.update_type.value}
        if t == "Adam":
            o["adam_hparam"] = {"beta1": F32(h["beta1"]), "beta2": F32(h["beta2"]), "epsilon": F32(h["epsilon"])}
        elif t == "AdaGrad":
            o["adagrad_hparam"] = {"initial_accu_value": F32(h["initial_accu_value"]), "epsilon": F32(h["epsilon"])}
        elif t == "MomentumSGD":
            o["momentum_sgd_hparam"] = {"momentum_factor": F32(h["momentum_factor"])}
        elif t == "Nesterov":
            o["nesterov_hparam"] = {"momentum_factor": F32(h["momentum_factor"])}
        elif t == "SGD":
            o["sgd_hparam"] = {"atomic_update": bool(h["atomic_update"])}
        elif t == "Ftrl":
            o["ftrl_hparam"] = {"beta": F32(h["beta"]), "lambda1": F32(h["lambda1"]), "lambda2": F32(h["lambda2"])}
        return o


def CreateOptimizer(optimizer_type=_enums.Optimizer_t.Adam, update_type=_enums.Update_t.Global, beta=0.0,
                    lambda1=0.0, lambda2=0.0, beta1=0.9, beta2=0.999, epsilon=0.0000001, initial_accu_value=0.0,
                    momentum_factor=0.0, atomic_update=True):
    """HugeCTR's CreateOptimizer."""
    _ev(optimizer_type, _enums.Optimizer_t, "optimizer_type")
    _ev(update_type, _enums.Update_t, "update_type")
    if optimizer_type is _enums.Optimizer_t.RMSProp:
        raise NotImplementedError("RMSProp: HugeCTR's graph_to_json cannot write it and ctrkit does not train it; "
                                  "use Adam, AdaGrad, MomentumSGD, Nesterov or SGD")
    if optimizer_type is _enums.Optimizer_t.Ftrl:
        raise NotImplementedError("Ftrl: ctrkit's trainer has no Ftrl; use Adam, AdaGrad, MomentumSGD, "
                                  "Nesterov or SGD")
    return OptParamsPy(optimizer_type, update_type, dict(
        beta=beta, lambda1=lambda1, lambda2=lambda2, beta1=beta1, beta2=beta2, epsilon=epsilon,
        initial_accu_value=initial_accu_value, momentum_factor=momentum_factor, atomic_update=atomic_update))


# ---------------------------------------------------------------- layers

def _loss_weight(w, name, what):
    """w as a float32 loss weight, finite and ≥ 0 (ctrkit's --loss-weights
    rule), else a ValueError naming the label."""
    try:
        f = F32(w)
    except OverflowError:
        f = math.inf
    except (TypeError, ValueError):
        raise ValueError("%s: weight %r for %s is not a number" % (what, w, name))
    if isinstance(w, bool) or not (f >= 0) or math.isinf(f):
        raise ValueError("%s: weight %r for %s: want a finite weight ≥ 0" % (what, w, name))
    return f


class Input(object):
    """HugeCTR's Input: labels, dense features and sparse inputs. HugeCTR's
    three constructors (HugeCTR/include/pybind/model_wrapper.hpp):

    Input(label_dim, label_name, dense_dim, dense_name, data_reader_sparse_param_array)
    Input(label_dims, label_names, dense_dim, dense_name, data_reader_sparse_param_array)
    Input(label_dims, label_names, label_weights, dense_dim, dense_name, data_reader_sparse_param_array)

    label_weights are the losses' weights by label (the model's loss is
    Σ weight·loss; Model.compile(loss_names, loss_weights) overrides them).
    label_dim and label_name also take lists (ctrkit's leniency).
    """

    _FORMS = (("label_dim", "label_name", "dense_dim", "dense_name", "data_reader_sparse_param_array"),
              ("label_dims", "label_names", "dense_dim", "dense_name", "data_reader_sparse_param_array"),
              ("label_dims", "label_names", "label_weights", "dense_dim", "dense_name",
               "data_reader_sparse_param_array"))

    def __init__(self, *args, **kwargs):
        if "label_weights" in kwargs or (len(args) >= 3 and isinstance(args[2], (list, tuple))):
            form = self._FORMS[2]
        elif "label_dims" in kwargs or "label_names" in kwargs:
            form = self._FORMS[1]
        else:
            form = self._FORMS[0]
        if len(args) > len(form):
            raise TypeError("Input takes at most %d arguments (%s), %d given" % (len(form), ", ".join(form), len(args)))
        a = dict(zip(form, args))
        for k, v in kwargs.items():
            if k not in form:
                raise TypeError("Input: unexpected argument %r (the form is Input(%s))" % (k, ", ".join(form)))
            if k in a:
                raise TypeError("Input: argument %r given twice" % k)
            a[k] = v
        missing = [k for k in form if k not in a]
        if missing:
            raise TypeError("Input needs %s" % ", ".join(missing))
        dims = a.get("label_dims", a.get("label_dim"))
        names = a.get("label_names", a.get("label_name"))
        dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
        names = list(names) if isinstance(names, (list, tuple)) else [names]
        if len(dims) != len(names) or not dims:
            raise ValueError("Input: %d label dims for %d label names (HugeCTR: number of label names does not "
                             "match number of label dimensions)" % (len(dims), len(names)))
        for n, d in zip(names, dims):
            if not isinstance(n, str) or not n:
                raise ValueError("Input: label name %r is not a non-empty string" % (n,))
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ValueError("Input: label %s: label_dim %r is not an integer ≥ 1" % (n, d))
        if len(set(names)) != len(names):
            raise ValueError("Input: label names %s repeat a name" % names)
        weights = [1.0] * len(names)
        if "label_weights" in a:
            weights = list(a["label_weights"])
            if len(weights) != len(names):
                raise ValueError("Input: %d label_weights for %d labels" % (len(weights), len(names)))
            weights = [_loss_weight(w, n, "Input label_weights") for n, w in zip(names, weights)]
        self.label_dims, self.label_names, self.label_weights = dims, names, weights
        self._weighted = "label_weights" in a
        self.dense_dim, self.dense_name = a["dense_dim"], a["dense_name"]
        self.data_reader_sparse_param_array = list(a["data_reader_sparse_param_array"])

    def _json(self, head=False):
        if len(self.label_names) == 1:
            label = {"top": self.label_names[0], "label_dim": self.label_dims[0]}
        else:
            order = sorted(range(len(self.label_names)), key=lambda i: self.label_names[i])
            label = {"top": [self.label_names[i] for i in order], "label_dim": [self.label_dims[i] for i in order]}
        sparse = []
        for s in self.data_reader_sparse_param_array:
            d = {"top": s.top_name, "slot_num": s.slot_num, "is_fixed_length": s.is_fixed_length,
                 "nnz_per_slot": list(s.nnz_per_slot)}
            if not head:
                d["type"] = "DistributedSlot"
            sparse.append(d)
        return {"type": "Data", "label": label, "dense": {"top": self.dense_name, "dense_dim": self.dense_dim},
                "sparse": sparse}


class HybridEmbeddingParam(object):
    """HugeCTR's HybridEmbeddingParam (HybridSparseEmbedding's settings)."""

    def __init__(self, max_num_frequent_categories, max_num_infrequent_samples, p_dup_max, max_all_reduce_bandwidth,
                 max_all_to_all_bandwidth, efficiency_bandwidth_ratio, communication_type, hybrid_embedding_type):
        _ev(communication_type, _enums.CommunicationType, "communication_type")
        _ev(hybrid_embedding_type, _enums.HybridEmbeddingType, "hybrid_embedding_type")
        self.max_num_frequent_categories = max_num_frequent_categories
        self.max_num_infrequent_samples = max_num_infrequent_samples
        self.p_dup_max = p_dup_max
        self.max_all_reduce_bandwidth = max_all_reduce_bandwidth
        self.max_all_to_all_bandwidth = max_all_to_all_bandwidth
        self.efficiency_bandwidth_ratio = efficiency_bandwidth_ratio
        self.communication_type = communication_type
        self.hybrid_embedding_type = hybrid_embedding_type


_STATE_COPIES = {"Adam": 2, "Ftrl": 2, "AdaGrad": 1, "MomentumSGD": 1, "Nesterov": 1, "RMSProp": 1, "SGD": 0}


class SparseEmbedding(object):
    """HugeCTR's SparseEmbedding."""

    def __init__(self, embedding_type, workspace_size_per_gpu_in_mb=0, embedding_vec_size=None, combiner=None,
                 sparse_embedding_name=None, bottom_name=None, slot_size_array=None, optimizer=None,
                 hybrid_embedding_param=None):
        _ev(embedding_type, _enums.Embedding_t, "embedding_type")
        if embedding_vec_size is None or combiner is None or sparse_embedding_name is None or bottom_name is None:
            raise TypeError("SparseEmbedding needs embedding_vec_size, combiner, sparse_embedding_name and bottom_name")
        if combiner not in ("sum", "mean"):
            raise ValueError("SparseEmbedding %s: combiner %r is not \"sum\" or \"mean\"" % (sparse_embedding_name, combiner))
        if optimizer is not None and not isinstance(optimizer, OptParamsPy):
            raise TypeError("SparseEmbedding optimizer: want what hugectr.CreateOptimizer returns")
        if workspace_size_per_gpu_in_mb == 0 and not slot_size_array:
            raise ValueError("SparseEmbedding %s: give workspace_size_per_gpu_in_mb or slot_size_array"
                             % sparse_embedding_name)
        self.embedding_type = embedding_type
        self.workspace_size_per_gpu_in_mb = int(workspace_size_per_gpu_in_mb)
        self.embedding_vec_size = int(embedding_vec_size)
        self.combiner = combiner
        self.sparse_embedding_name = sparse_embedding_name
        self.bottom_name = bottom_name
        self.slot_size_array = [int(x) for x in (slot_size_array or [])]
        self.optimizer = optimizer
        self.hybrid_embedding_param = hybrid_embedding_param or HybridEmbeddingParam(
            1, -1, 0.01, 1.3e11, 2.6e11, 1.0, _enums.CommunicationType.NVLink_SingleNode,
            _enums.HybridEmbeddingType.Distributed)

    def _json(self, model_opt, gpus):
        opt = (self.optimizer or model_opt)._json()
        c = _STATE_COPIES[opt["type"]] + (1 if opt["type"] == "Adam" and opt["update_type"] == "LazyGlobal" else 0)
        per_gpu = (self.workspace_size_per_gpu_in_mb << 20) // ((1 + c) * 4 * self.embedding_vec_size)
        h = {"embedding_vec_size": self.embedding_vec_size, "combiner": self.combiner,
             "workspace_size_per_gpu_in_mb": self.workspace_size_per_gpu_in_mb,
             "max_vocabulary_size_global": per_gpu * gpus}
        if self.slot_size_array:
            h["slot_size_array"] = list(self.slot_size_array)
        if self.embedding_type is _enums.Embedding_t.HybridSparseEmbedding:
            p = self.hybrid_embedding_param
            h.update({"max_num_frequent_categories": int(p.max_num_frequent_categories),
                      "max_num_infrequent_samples": int(p.max_num_infrequent_samples),
                      "p_dup_max": float(p.p_dup_max), "max_all_reduce_bandwidth": float(p.max_all_reduce_bandwidth),
                      "max_all_to_all_bandwidth": float(p.max_all_to_all_bandwidth),
                      "efficiency_bandwidth_ratio": float(p.efficiency_bandwidth_ratio),
                      "communication_type": p.communication_type.value,
                      "hybrid_embedding_type": p.hybrid_embedding_type.value})
        return {"type": self.embedding_type.value, "bottom": self.bottom_name, "top": self.sparse_embedding_name,
                "sparse_embedding_hparam": h, "optimizer": opt}


class DenseLayerComputeConfig(object):
    """HugeCTR's DenseLayerComputeConfig (GPU scheduling hints)."""

    def __init__(self, async_wgrad=False, fuse_wb=False):
        self.async_wgrad, self.fuse_wb = async_wgrad, fuse_wb


class DenseLayer(object):
    """HugeCTR's DenseLayer: every argument of HugeCTR's, with its default."""

    def __init__(self, layer_type, bottom_names, top_names, factor=1.0, eps=0.00001,
                 gamma_init_type=_enums.Initializer_t.Default, beta_init_type=_enums.Initializer_t.Default,
                 dropout_rate=0.5, elu_alpha=1.0, num_output=1, weight_init_type=_enums.Initializer_t.Default,
                 bias_init_type=_enums.Initializer_t.Default, num_layers=0, leading_dim=0, time_step=0,
                 batchsize=1, SeqLength=1, vector_size=1, selected=False, selected_slots=None, ranges=None,
                 indices=None, weight_dims=None, projection_dim=0, out_dim=0, axis=1, max_sequence_len_from=1,
                 max_sequence_len_to=1, num_attention_heads=1, transpose_b=False, target_weight_vec=None,
                 use_regularizer=False, regularizer_type=_enums.Regularizer_t.L1, lambda_=0.0,
                 pos_type=_enums.FcPosition_t.Non, act_type=_enums.Activation_t.Relu, num_outputs=None,
                 use_bias=True, activations=None, biases=None, compute_config=None, shape=None, dim=0, index=None,
                 **kw):
        if "lambda" in kw:
            lambda_ = kw.pop("lambda")
        if kw:
            raise TypeError("DenseLayer: unexpected argument %s" % ", ".join(sorted(kw)))
        _ev(layer_type, _enums.Layer_t, "layer_type")
        for v, e, n in [(gamma_init_type, _enums.Initializer_t, "gamma_init_type"),
                        (beta_init_type, _enums.Initializer_t, "beta_init_type"),
                        (weight_init_type, _enums.Initializer_t, "weight_init_type"),
                        (bias_init_type, _enums.Initializer_t, "bias_init_type"),
                        (regularizer_type, _enums.Regularizer_t, "regularizer_type"),
                        (pos_type, _enums.FcPosition_t, "pos_type"), (act_type, _enums.Activation_t, "act_type")]:
            _ev(v, e, n)
        for a in activations or []:
            _ev(a, _enums.Activation_t, "activations")
        if shape:
            raise NotImplementedError("DenseLayer shape=: HugeCTR's graph_to_json loses the general Reshape's shape "
                                      "(it writes leading_dim 0); use leading_dim and time_step")
        if layer_type in (_enums.Layer_t.Select, _enums.Layer_t.ReLUHalf):
            raise NotImplementedError("%s: HugeCTR's construct_from_json cannot read it back, and ctrkit runs "
                                      "models through their JSON" % layer_type.name)
        self.layer_type = layer_type
        self.bottom_names = _strs(bottom_names, "bottom_names")
        self.top_names = _strs(top_names, "top_names")
        self.factor, self.eps = factor, eps
        self.gamma_init_type, self.beta_init_type = gamma_init_type, beta_init_type
        self.dropout_rate, self.elu_alpha, self.num_output = dropout_rate, elu_alpha, num_output
        self.weight_init_type, self.bias_init_type = weight_init_type, bias_init_type
        self.num_layers, self.leading_dim, self.time_step = num_layers, leading_dim, time_step
        self.batchsize, self.SeqLength, self.vector_size = batchsize, SeqLength, vector_size
        self.selected, self.selected_slots = selected, list(selected_slots or [])
        self.ranges = [tuple(r) for r in (ranges or [])]
        self.indices = list(indices or [])
        self.weight_dims = list(weight_dims or [])
        self.projection_dim, self.out_dim, self.axis = projection_dim, out_dim, axis
        self.max_sequence_len_from, self.max_sequence_len_to = max_sequence_len_from, max_sequence_len_to
        self.num_attention_heads, self.transpose_b = num_attention_heads, transpose_b
        self.target_weight_vec = list(target_weight_vec or [])
        self.use_regularizer, self.regularizer_type = use_regularizer, regularizer_type
        self.lambda_ = lambda_
        self.pos_type, self.act_type = pos_type, act_type
        self.num_outputs, self.use_bias = list(num_outputs or []), use_bias
        self.activations, self.biases = list(activations or []), list(biases or [])
        self.compute_config = compute_config or DenseLayerComputeConfig()
        self.shape, self.dim, self.index = list(shape or []), dim, list(index or [])

    def _json(self, label_dims):
        """The layer as HugeCTR's graph_to_json writes it."""
        t = self.layer_type.value
        L = _enums.Layer_t

        def names(v):
            return v[0] if len(v) == 1 else list(v)

        m = {"type": t, "bottom": names(self.bottom_names), "top": names(self.top_names)}

        def inits(d, weight, bias):
            if weight and self.weight_init_type is not _enums.Initializer_t.Default:
                d[weight] = self.weight_init_type.value
            if bias and self.bias_init_type is not _enums.Initializer_t.Default:
                d[bias] = self.bias_init_type.value

        lt = self.layer_type
        if lt in (L.InnerProduct, L.FusedInnerProduct):
            p = {"num_output": int(self.num_output)}
            inits(p, "weight_init", "bias_init")
            m["fc_param"] = p
            if lt is L.FusedInnerProduct:
                m["position"], m["activation"] = self.pos_type.value, self.act_type.value
        elif lt is L.MLP:
            p = {"num_output": int(self.num_output)}
            if self.num_outputs:
                p["num_outputs"] = [int(x) for x in self.num_outputs]
            if self.biases:
                p["biases"] = [bool(b) for b in self.biases]
            else:
                p["use_bias"] = bool(self.use_bias)
            if self.activations:
                p["activations"] = [a.value for a in self.activations]
            else:
                p["activation"] = self.act_type.value
            inits(p, "weight_init", "bias_init")
            m["mlp_param"] = p
        elif lt is L.Dropout:
            m["rate"] = F32(self.dropout_rate)
        elif lt is L.ELU:
            m["elu_param"] = {"alpha": F32(self.elu_alpha)}
        elif lt is L.PReLU_Dice:
            m["prelu_dice_param"] = {"alpha": F32(self.elu_alpha), "elu_alpha": F32(self.elu_alpha),
                                     "eps": F32(self.eps)}
        elif lt in (L.BatchNorm, L.LayerNorm):
            p = {"eps": F32(self.eps)}
            if lt is L.BatchNorm:
                p["factor"] = F32(self.factor)
            if self.gamma_init_type is not _enums.Initializer_t.Default:
                p["gamma_init"] = self.gamma_init_type.value
            if self.beta_init_type is not _enums.Initializer_t.Default:
                p["beta_init"] = self.beta_init_type.value
            m["bn_param" if lt is L.BatchNorm else "ln_param"] = p
        elif lt in (L.Concat, L.ReduceSum, L.ReduceMean):
            m["axis"] = int(self.axis)
        elif lt is L.Reshape:
            if self.selected:
                m["selected"] = [int(x) for x in self.selected_slots]
            else:
                m["leading_dim"], m["time_step"] = int(self.leading_dim), int(self.time_step)
        elif lt is L.Slice:
            m["ranges"] = [[int(a), int(b)] for a, b in self.ranges]
        elif lt is L.MultiCross:
            p = {"num_layers": int(self.num_layers)}
            if self.projection_dim:
                p["projection_dim"] = int(self.projection_dim)
            inits(p, "weight_init", "bias_init")
            m["mc_param"] = p
        elif lt is L.WeightMultiply:
            m["weight_dims"] = [int(x) for x in self.weight_dims]
            inits(m, "weight_init", None)
        elif lt is L.FmOrder2:
            m["out_dim"] = int(self.out_dim)
        elif lt is L.Softmax:
            m["factor"] = F32(self.factor)
        elif lt is L.Scale:
            m["scale_param"] = {"axis": int(self.axis), "factor": F32(self.factor)}
        elif lt is L.Gather:
            m["indices"] = [int(x) for x in self.indices]
        elif lt is L.GRU:
            p = {"num_output": int(self.num_output), "batchsize": int(self.batchsize),
                 "SeqLength": int(self.SeqLength), "vector_size": int(self.vector_size)}
            inits(p, "weight_init", "bias_init")
            m["gru_param"] = p
        elif lt is L.MultiHeadAttention:
            m["num_attention_heads"], m["transpose_b"] = int(self.num_attention_heads), bool(self.transpose_b)
        elif lt is L.SequenceMask:
            m["max_sequence_len_from"] = int(self.max_sequence_len_from)
            m["max_sequence_len_to"] = int(self.max_sequence_len_to)
        elif lt in (L.BinaryCrossEntropyLoss, L.CrossEntropyLoss, L.MultiCrossEntropyLoss):
            if self.use_regularizer:
                m["regularizer"], m["lambda"] = self.regularizer_type.value, F32(self.lambda_)
            if lt is L.MultiCrossEntropyLoss:
                tw = [F32(x) for x in self.target_weight_vec]
                if not tw and len(self.bottom_names) == 2 and self.bottom_names[1] in label_dims:
                    tw = [F32(1.0)] * label_dims[self.bottom_names[1]]
                if tw:
                    m["target_weight"] = tw
        return m


class GroupDenseLayer(object):
    """HugeCTR's GroupDenseLayer: a chain of FusedInnerProduct layers
    (mixed precision only, as in HugeCTR)."""

    def __init__(self, group_layer_type, bottom_name_list, top_name_list, num_outputs,
                 last_act_type=_enums.Activation_t.Relu):
        _ev(group_layer_type, _enums.GroupLayer_t, "group_layer_type")
        _ev(last_act_type, _enums.Activation_t, "last_act_type")
        if len(top_name_list) != len(num_outputs) or not num_outputs:
            raise ValueError("GroupDenseLayer: %d top names for %d num_outputs" % (len(top_name_list), len(num_outputs)))
        self.group_layer_type = group_layer_type
        self.bottom_name_list = _strs(bottom_name_list, "bottom_name_list")
        self.top_name_list = _strs(top_name_list, "top_name_list")
        self.num_outputs = [int(x) for x in num_outputs]
        self.last_act_type = last_act_type

    def _layers(self):
        """HugeCTR's Model::add(GroupDenseLayer): Head, Body…, Tail."""
        n = len(self.num_outputs)
        names = [list(self.bottom_name_list)]
        for i in range(1, n):
            t = self.top_name_list[i - 1]
            names.append([t, t + "_mask", t + "_dRelu", t + "_db"])
        names.append([self.top_name_list[n - 1]])
        FP, Act = _enums.FcPosition_t, _enums.Activation_t
        out = [DenseLayer(_enums.Layer_t.FusedInnerProduct, names[0], names[1], num_output=self.num_outputs[0],
                          pos_type=FP.Head, act_type=Act.Relu)]
        for i in range(1, n - 1):
            out.append(DenseLayer(_enums.Layer_t.FusedInnerProduct, names[i], names[i + 1],
                                  num_output=self.num_outputs[i], pos_type=FP.Body, act_type=Act.Relu))
        out.append(DenseLayer(_enums.Layer_t.FusedInnerProduct, names[n - 1], names[n],
                              num_output=self.num_outputs[n - 1], pos_type=FP.Tail, act_type=self.last_act_type))
        if n == 1:
            out = [DenseLayer(_enums.Layer_t.FusedInnerProduct, names[0], names[1], num_output=self.num_outputs[0],
                              pos_type=FP.Tail, act_type=self.last_act_type)]
        return out


# ---------------------------------------------------------------- graph analysis

_SAME_SHAPE = {"ReLU", "Sigmoid", "Dropout", "ELU", "PReLU_Dice", "BatchNorm", "LayerNorm", "Cast", "MultiCross",
               "Softmax", "Add", "ElementwiseMultiply", "Sub"}


def _names(v):
    return [v] if isinstance(v, str) else list(v)


def _shapes(data, layers):
    """Per-sample tensor shapes (without the batch) of the graph, None
    where ctrkit's Python side does not infer them."""
    sh = {}
    labels = data["label"]
    for t, d in zip(_names(labels["top"]), labels["label_dim"] if isinstance(labels["label_dim"], list)
                    else [labels["label_dim"]]):
        sh[t] = (d,)
    sh[data["dense"]["top"]] = (data["dense"]["dense_dim"],)
    slots = {s["top"]: s["slot_num"] for s in data["sparse"]}
    for l in layers:
        t = l["type"]
        bots, tops = _names(l["bottom"]), _names(l["top"])
        if "sparse_embedding_hparam" in l:
            sh[tops[0]] = (slots.get(bots[0], 0), l["sparse_embedding_hparam"]["embedding_vec_size"])
            continue
        ins = [sh.get(b) for b in bots]
        x = ins[0] if ins else None
        out = None
        try:
            if t in ("InnerProduct", "FusedInnerProduct"):
                out = x[:-1] + (l["fc_param"]["num_output"],)
            elif t == "MLP":
                p = l["mlp_param"]
                out = x[:-1] + ((p.get("num_outputs") or [p["num_output"]])[-1],)
            elif t in _SAME_SHAPE:
                out = x
            elif t == "Concat":
                if len(x) == 1:
                    out = (sum(s[0] for s in ins),)
                elif l.get("axis", 1) == 1:
                    out = (sum(s[0] for s in ins), x[1])
                else:
                    out = (x[0], sum(s[1] for s in ins))
            elif t == "Reshape":
                if "selected" in l:
                    out = (len(l["selected"]) * x[-1],)
                elif l.get("time_step", 0):
                    out = (l["time_step"], l["leading_dim"])
                else:
                    out = (l["leading_dim"],)
            elif t == "Slice":
                for top, (a, b) in zip(tops, l["ranges"]):
                    sh[top] = x[:-1] + (b - a,)
                continue
            elif t == "Interaction":
                s, v = ins[1][0], ins[0][-1]
                out = (v + s * (s + 1) // 2 + 1,)
            elif t == "WeightMultiply":
                out = (l["weight_dims"][0] * l["weight_dims"][1],)
            elif t == "FmOrder2":
                out = (l["out_dim"],)
            elif t in ("ReduceSum", "ReduceMean"):
                a = l["axis"] - 1
                out = x[:a] + (1,) + x[a + 1:]
            elif t in ("BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"):
                out = (1,)
        except (TypeError, IndexError, KeyError):
            out = None
        for top in tops:
            sh[top] = out
    return sh


class _UnknownWidth(ValueError):
    pass


def _go_shapes(data, layers):
    """The per-sample shapes of every tensor of the graph as ctrkit's
    summary infers them (for the layers _shapes does not follow)."""
    d = tempfile.mkdtemp(prefix="ctrkit-shapes-")
    try:
        path = os.path.join(d, "graph.json")
        with open(path, "w") as f:
            f.write(_dumps({"layers": [data] + list(layers)}))
        out = json.loads(_proc.run(["summary", "--config", path, "--json"]))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sh = {}
    for l in out.get("layers", []):
        for top, shape in zip(l.get("top", []), l.get("output_shapes", [])):
            dims = [x.strip() for x in shape.strip("[]").split(",")][1:]  # without the batch
            try:
                sh[top] = tuple(int(x) for x in dims)
            except ValueError:
                pass
    return sh


def _auto_slice(data, layers, known=None):
    """HugeCTR's Model::graph_analysis: a tensor read by several dense
    layers (at most 5) gets a Slice layer before its first reader with tops
    <name>_slice<i> and full ranges; each reader reads its own slice.
    Widths come from _shapes, else from known (a tensor of unknown width
    raises _UnknownWidth)."""
    dense = [l for l in layers if "sparse_embedding_hparam" not in l]
    readers = {}
    for l in dense:
        for b in _names(l["bottom"]):
            readers[b] = readers.get(b, 0) + 1
    if all(n < 2 for n in readers.values()):
        return layers
    sh = _shapes(data, layers)
    for k, v in (known or {}).items():
        if not sh.get(k):
            sh[k] = v
    out, nxt = [], {}
    for l in layers:
        if "sparse_embedding_hparam" in l:
            out.append(l)
            continue
        l = copy.deepcopy(l)
        bots = _names(l["bottom"])
        for j, b in enumerate(bots):
            n = readers.get(b, 0)
            if n < 2:
                continue
            if n > 5:
                raise ValueError("tensor %r has %d readers (HugeCTR allows 5)" % (b, n))
            if b not in nxt:
                s = sh.get(b)
                if not s:
                    raise _UnknownWidth("tensor %r feeds %d layers and its width is not known here; add a Slice "
                                        "layer yourself (ranges [[0, width]] × %d)" % (b, n, n))
                out.append({"type": "Slice", "bottom": b, "top": ["%s_slice%d" % (b, i) for i in range(n)],
                            "ranges": [[0, s[-1]] for _ in range(n)]})
                nxt[b] = 0
            bots[j] = "%s_slice%d" % (b, nxt[b])
            nxt[b] += 1
        l["bottom"] = bots[0] if isinstance(l["bottom"], str) else bots
        out.append(l)
    return out


# ---------------------------------------------------------------- low-level helpers

class LearningRateScheduler(object):
    """The model's learning-rate schedule (CreateSolver's lr, warmup_steps,
    decay_start, decay_steps, decay_power, end_lr)."""

    def __init__(self, model):
        self._model = model

    def get_next(self):
        """The learning rate of the next iteration (advances the schedule)."""
        return self._model._session().request("lr_next")["lr"]


class DataReader(object):
    """The training or evaluation reader of a model (low-level API)."""

    def __init__(self, model, train):
        self._model, self._train = model, train

    def set_source(self, file_name=""):
        """Reads file_name next; "" starts the current source again."""
        m = self._model
        if self._train:
            src = file_name or (m._reader.source[0] if len(m._reader.source) == 1 else None)
            if file_name:
                m._reader.source = [file_name]
            if m._sess is not None:
                if src is None:
                    m._sess.request("start_data_reading")
                else:
                    m._sess.request("set_source", source=src)
                m._eof = False
        else:
            if file_name:
                m._reader.eval_source = file_name
            if m._sess is not None:
                m._sess.request("set_source", eval_source=m._reader.eval_source)

    def is_eof(self):
        """Whether the reader has reached the end of its source."""
        return bool(self._model._eof) if self._train else False

    def is_started(self):
        return self._model._sess is not None


# HugeCTR's names of the reader classes (32- and 64-bit keys).
DataReader32 = DataReader64 = DataReader


class EmbeddingTrainingCache(object):
    """HugeCTR's Embedding Training Cache (Model.get_embedding_training_cache),
    which ctrkit has not."""

    def __init__(self, *args, **kw):
        CreateETC(None)

    def update(self, keyset_file):
        CreateETC(None)


# ---------------------------------------------------------------- model

_WORKDIRS = []


@atexit.register
def _cleanup():
    for d in _WORKDIRS:
        shutil.rmtree(d, ignore_errors=True)


def _one_of(what, a_name, a, b_name, b):
    """The one of two alternative arguments given (HugeCTR's overloads)."""
    if (a is None) == (b is None):
        raise TypeError("%s: give %s or %s" % (what, a_name, b_name))
    return a if a is not None else b


class Model(object):
    """HugeCTR's Model, trained by ctrkit."""

    def __init__(self, solver, reader_params, opt_params, etc_params=None):
        if not isinstance(solver, Solver):
            raise TypeError("Model solver: want what hugectr.CreateSolver returns")
        if not isinstance(reader_params, DataReaderParams):
            raise TypeError("Model reader_params: want a hugectr.DataReaderParams")
        if not isinstance(opt_params, OptParamsPy):
            raise TypeError("Model opt_params: want what hugectr.CreateOptimizer returns")
        if etc_params is not None:
            CreateETC(None)
        self._solver, self._reader, self._opt = solver, copy.deepcopy(reader_params), opt_params
        self._input = None
        self._data_json = None
        self._embeddings = []  # graph JSON dicts
        self._dense = []  # graph JSON dicts
        self._compiled = False
        self._dir = tempfile.mkdtemp(prefix="ctrkit-model-")
        _WORKDIRS.append(self._dir)
        self._sess = None
        self._eof = False
        self._pending_eval = 0
        self._last_loss = None
        self._freeze_dense = False
        self._frozen = set()
        self._freeze_all = False
        self._init = {"dense": "", "dense_opt": "", "sparse": {}, "sparse_opt": {}}
        self._plot = None
        self._summary = None
        self._label_dims = {}
        self._label_weights = {}  # label name → loss weight (Input label_weights, compile)
        self._weights_set = set()  # the labels whose weight was given
        self._eval_tasks = None

    # ---- building

    def add(self, layer):
        """Adds an Input, SparseEmbedding, DenseLayer or GroupDenseLayer."""
        if isinstance(layer, Input):
            if self._input is not None:
                raise ValueError("the model has an Input already")
            self._input = layer
            self._data_json = layer._json()
            self._label_dims = dict(zip(layer.label_names, layer.label_dims))
            self._label_weights = dict(zip(layer.label_names, layer.label_weights))
            self._weights_set = set(layer.label_names) if layer._weighted else set()
        elif isinstance(layer, SparseEmbedding):
            if self._dense:
                raise ValueError("SparseEmbedding %s: add the embeddings before the dense layers (HugeCTR's JSON "
                                 "keeps them first)" % layer.sparse_embedding_name)
            self._embeddings.append(layer._json(self._opt, self._gpus()))
        elif isinstance(layer, DenseLayer):
            self._dense.append(layer._json(self._label_dims))
        elif isinstance(layer, GroupDenseLayer):
            if not self._solver.use_mixed_precision:
                raise ValueError("GroupFusedInnerProduct can only be used when use_mixed_precision is set true")
            for l in layer._layers():
                self._dense.append(l._json(self._label_dims))
        else:
            raise TypeError("Model.add: want hugectr.Input, SparseEmbedding, DenseLayer or GroupDenseLayer, have %r"
                            % (layer,))
        self._compiled = False
        self._close_session()

    def _gpus(self):
        return max(sum(len(v) for v in self._solver.vvgpu), 1)

    def _layers(self):
        if self._data_json is None:
            raise ValueError("the model has no Input: add a hugectr.Input first")
        layers = self._embeddings + self._dense
        try:
            return [self._data_json] + _auto_slice(self._data_json, layers)
        except _UnknownWidth:
            # Layers whose shapes only ctrkit follows (attention, sequence
            # masks, 3-D reductions…): ask `ctrkit summary`.
            key = _dumps({"layers": [self._data_json] + layers})
            if getattr(self, "_shape_key", None) != key:
                self._go_sh, self._shape_key = _go_shapes(self._data_json, layers), key
            return [self._data_json] + _auto_slice(self._data_json, layers, self._go_sh)

    def _graph(self):
        g = {"layers": self._layers()}
        if self._solver.model_name:
            g["model_name"] = self._solver.model_name
        return g

    def graph_to_json(self, graph_config_file):
        """Writes the model graph as HugeCTR's graph_to_json does."""
        text = _dumps(self._graph())
        tmp = graph_config_file + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, graph_config_file)
        _log("Save the model graph to %s successfully" % graph_config_file)

    def construct_from_json(self, graph_config_file, include_dense_network):
        """Builds the model from a graph JSON (graph_to_json's, or a JSON
        config's layers); with include_dense_network False only the Input
        and the embeddings."""
        with open(graph_config_file) as f:
            try:
                g = json.load(f)
            except ValueError as e:
                raise ValueError("%s: %s" % (graph_config_file, e))
        layers = g.get("layers") if isinstance(g, dict) else None
        if not layers or layers[0].get("type") != "Data":
            raise ValueError("%s: not a model graph (want \"layers\" starting with a Data layer)" % graph_config_file)
        data = {k: v for k, v in layers[0].items() if k in ("type", "label", "dense", "sparse")}
        for s in data.get("sparse", []):
            if isinstance(s.get("nnz_per_slot"), int):
                s["nnz_per_slot"] = [s["nnz_per_slot"]] * s["slot_num"]
            s.setdefault("type", "DistributedSlot")
        self._data_json = data
        lab = data["label"]
        tops, dims = _names(lab["top"]), lab["label_dim"] if isinstance(lab["label_dim"], list) else [lab["label_dim"]]
        self._label_dims = dict(zip(tops, dims))
        self._label_weights, self._weights_set = {t: 1.0 for t in tops}, set()
        self._input = True
        emb_types = {e.value for e in _enums.Embedding_t}
        i = 1
        self._embeddings, self._dense = [], []
        while i < len(layers) and layers[i].get("type") in emb_types:
            e = {k: v for k, v in layers[i].items() if k != "name"}
            if "optimizer" not in e:
                e["optimizer"] = self._opt._json()
            self._embeddings.append(e)
            i += 1
        if include_dense_network:
            self._dense = [{k: v for k, v in l.items() if k != "name"} for l in layers[i:]]
        if g.get("model_name") and not self._solver.model_name:
            self._solver.model_name = g["model_name"]
        self._compiled = False
        self._close_session()

    # ---- the run config

    def _reader_json(self):
        r = self._reader
        d = {"format": r.data_reader_type.value, "source": list(r.source), "check": r.check_type.value,
             "num_workers": int(r.num_workers)}
        if r.eval_source:
            d["eval_source"] = r.eval_source
        if r.slot_size_array:
            d["slot_size_array"] = list(r.slot_size_array)
        if r.num_samples:
            d["num_samples"] = int(r.num_samples)
        if r.eval_num_samples:
            d["eval_num_samples"] = int(r.eval_num_samples)
        if r.float_label_dense:
            d["float_label_dense"] = True
        if r.cache_eval_data:
            d["cache_eval_data"] = int(r.cache_eval_data)
        if r.data_reader_type is _enums.DataReaderType_t.RawAsync:
            a = r.async_param
            d["async_param"] = {"num_threads": a.num_threads, "num_batches_per_thread": a.num_batches_per_thread,
                                "shuffle": bool(a.shuffle), "io_depth": a.io_depth, "io_alignment": a.io_alignment,
                                "multi_hot_reader": bool(a.multi_hot_reader), "is_dense_float": bool(a.is_dense_float)}
        return d

    def _config(self):
        """The JSON config ctrkit runs: the graph plus solver, optimizer and
        the reader's keys in the Data layer."""
        s = self._solver
        layers = self._layers()
        data = dict(layers[0])
        data["dense"] = dict(data["dense"])
        data.update(self._reader_json())
        if self._reader.data_reader_type is _enums.DataReaderType_t.RawAsync and \
                self._reader.async_param.aligned_type is _enums.Alignment_t.Auto:
            data["dense"]["aligned"] = "Auto"
        solver = {"batchsize": int(s.batchsize), "batchsize_eval": int(s.batchsize_eval),
                  "max_eval_batches": int(s.max_eval_batches), "seed": int(s.seed), "lr_policy": "fixed",
                  "gpu": [list(v) for v in s.vvgpu],
                  "input_key_type": "I64" if s.i64_input_key else "I32",
                  "algorithm_search": bool(s.use_algorithm_search),
                  "cuda_graph": bool(s.use_cuda_graph),
                  "eval_metrics": ["%s:%r" % (k.value, float(v)) for k, v in s.metrics_spec.items()]}
        if s.use_mixed_precision:
            solver["mixed_precision"] = float(s.scaler)
        elif s.enable_tf32_compute:
            solver["enable_tf32_compute"] = True
        init = self._init
        names = [e["top"] for e in self._embeddings]
        if init["dense"]:
            solver["dense_model_file"] = init["dense"]
        if init["dense_opt"]:
            solver["dense_opt_states_file"] = init["dense_opt"]
        for key, files in (("sparse_model_file", init["sparse"]), ("sparse_opt_states_file", init["sparse_opt"])):
            if files:
                missing = [n for n in names if n not in files]
                if missing:
                    raise ValueError("fit loads one %s per embedding; none was given for %s"
                                     % (key, ", ".join(missing)))
                solver[key] = [files[n] for n in names]
        opt = self._opt._json()
        hk = [k for k in opt if k.endswith("_hparam")]
        h = dict(opt[hk[0]]) if hk else {}
        h.update({"learning_rate": F32(s.lr), "warmup_steps": int(s.warmup_steps), "decay_start": int(s.decay_start),
                  "decay_steps": int(s.decay_steps), "decay_power": F32(s.decay_power), "end_lr": F32(s.end_lr)})
        opt[hk[0] if hk else {"SGD": "sgd_hparam"}.get(opt["type"], "sgd_hparam")] = h
        cfg = {"solver": solver, "optimizer": opt, "layers": [data] + layers[1:]}
        if s.model_name:
            cfg["model_name"] = s.model_name
        return cfg

    def _write_config(self):
        path = os.path.join(self._dir, "model.json")
        with open(path, "w") as f:
            f.write(_dumps(self._config()))
        return path

    def compile(self, loss_names=None, loss_weights=None):
        """Checks the model (ctrkit reads it as it will train it).
        compile(loss_names, loss_weights) sets the weights of the losses by
        label name (HugeCTR's update_label_weights): the model's loss is
        Σ weight·loss over its loss layers; labels not named keep their
        weight (Input label_weights, else 1)."""
        if (loss_names is None) != (loss_weights is None):
            raise TypeError("compile: give both loss_names and loss_weights, or neither")
        if loss_names is not None:
            names, weights = list(_strs(loss_names, "loss_names")), list(loss_weights)
            if len(names) != len(weights):
                raise ValueError("compile: %d loss_names for %d loss_weights (HugeCTR: must have the same number "
                                 "of label names and weights)" % (len(names), len(weights)))
            if self._data_json is None:
                raise ValueError("compile(loss_names, loss_weights): the model has no Input: add a hugectr.Input "
                                 "first")
            ws = {}
            for n, w in zip(names, weights):
                if n not in self._label_weights:
                    raise ValueError("compile: label name not found: %s (the Input's labels: %s)"
                                     % (n, ", ".join(sorted(self._label_weights))))
                ws[n] = _loss_weight(w, n, "compile loss_weights")
            self._label_weights.update(ws)
            self._weights_set.update(ws)
            self._close_session()
        path = self._write_config()
        self._summary = _proc.run(["summary", "--config", path])
        self._compiled = True

    def summary(self):
        """Prints the model's layers, shapes and parameter counts (ctrkit
        summary) and returns the text."""
        if not self._compiled:
            self.compile()
        print(self._summary, end="")
        sys.stdout.flush()
        return self._summary

    # ---- fit

    def _loss_labels(self):
        """The labels the loss layers read (bottom 1), in layer order."""
        out = []
        for l in self._dense:
            if l.get("type") in ("BinaryCrossEntropyLoss", "CrossEntropyLoss", "MultiCrossEntropyLoss"):
                b = _names(l.get("bottom", []))
                if len(b) == 2:
                    out.append(b[1])
        return out

    def _loss_weights_flag(self):
        """--loss-weights LABEL=W,… for the given weights of labels a loss
        reads (HugeCTR keeps weights of other labels unused); [] if none."""
        pairs = []
        for n in self._loss_labels():
            if n in self._weights_set:
                if "," in n or "=" in n:
                    raise ValueError("loss weight for label %r: ctrkit's --loss-weights cannot name a label "
                                     "with ',' or '='; rename the label" % n)
                pairs.append("%s=%r" % (n, float(self._label_weights[n])))
        return ["--loss-weights", ",".join(pairs)] if pairs else []

    def _train_flags(self, session=False):
        # session: the flags of ctrkit session, which are those of train
        # (solver.gpu comes with the config in both).
        f = ["--config", self._write_config(), "--device", _device()] + self._loss_weights_flag()
        # HugeCTR's Model::read_a_batch: drop_incomplete_batch (default True)
        # skips short training batches in both modes.
        f.append("--drop-incomplete-batch=%s" % ("true" if self._solver.drop_incomplete_batch else "false"))
        if getattr(self._solver, "ctrkit_precision", None) == "bf16":
            # No JSON key picks bf16: the flag does (docs/PRECISION.md).
            f += ["--precision", "bf16"]
            if float(self._solver.scaler) != 1.0:
                f += ["--loss-scale", repr(float(self._solver.scaler))]
        if self._freeze_dense:
            f.append("--freeze-dense")
        names = [e["top"] for e in self._embeddings] if self._freeze_all else sorted(self._frozen)
        for n in names:
            f += ["--freeze-embedding", n]
        return f

    def fit(self, num_epochs=0, max_iter=2000, display=200, eval_interval=1000, snapshot=10000, snapshot_prefix=""):
        """Trains (ctrkit train): max_iter iterations when the solver's
        repeat_dataset is True, else num_epochs epochs. Prints HugeCTR-style
        lines and returns the history (one dict per display or eval).
        After low-level steps it trains on from their model (weights,
        optimizer state, iteration); the training data starts again at its
        beginning."""
        if not self._compiled:
            self.compile()
        args = ["train"] + self._train_flags()
        if self._sess is not None:
            # Continue from the session's model: save it, train from the files.
            it = self._sess.request("info")["iter"]
            prefix = os.path.join(self._dir, "resume")
            self._sess.request("save", prefix=prefix, iter=it)
            self._close_session()
            args += ["--load-prefix", prefix, "--load-iter", str(it)]
        if self._solver.repeat_dataset:
            if max_iter <= 0:
                raise ValueError("fit: max_iter %d; with repeat_dataset=True give max_iter > 0" % max_iter)
            args += ["--max-iter", str(max_iter)]
        else:
            if num_epochs <= 0:
                raise ValueError("fit: num_epochs %d; with repeat_dataset=False give num_epochs > 0" % num_epochs)
            args += ["--num-epochs", str(num_epochs)]
        metrics = os.path.join(self._dir, "metrics.jsonl")
        plot = os.path.join(self._dir, "training.png")
        if os.path.exists(metrics):
            os.remove(metrics)
        open(metrics, "w").close()
        args += ["--display", str(display), "--eval-interval", str(eval_interval), "--metrics-out", metrics]
        if display > 0 or eval_interval > 0:
            args += ["--plot", plot]  # nothing to plot otherwise
        if snapshot_prefix:
            args += ["--snapshot", str(snapshot), "--snapshot-prefix", snapshot_prefix]
        else:
            # Without a prefix HugeCTR writes _dense_<iter>.model… into the
            # working directory; ctrkit saves snapshots only with one.
            args += ["--snapshot", "0"]
        p = _proc.popen(args)
        out, err = [], []
        ts = [threading.Thread(target=lambda s, b: b.extend(s), args=(p.stdout, out), daemon=True),
              threading.Thread(target=lambda s, b: b.extend(s), args=(p.stderr, err), daemon=True)]
        for t in ts:
            t.start()
        history = []
        self._last_display = 0
        with open(metrics) as mf:
            buf = ""
            last = time.time()
            while True:
                done = p.poll() is not None
                chunk = mf.read()
                buf += chunk
                while "\n" in buf:
                    line, buf = buf.split("\n", 1)
                    if line.strip():
                        pt = json.loads(line)
                        history.append(pt)
                        self._print_point(pt, time.time() - last)
                        last = time.time()
                if done and not chunk:
                    break
                if not chunk:
                    time.sleep(0.02)
        for t in ts:
            t.join()
        p.wait()
        p.stdout.close()
        p.stderr.close()
        if p.returncode != 0:
            raise _proc.fail(p, "".join(err))
        self._plot = plot if "--plot" in args and os.path.exists(plot) else None
        self._history = history
        return history

    def _print_point(self, pt, secs):
        if pt.get("loss") is not None:
            self._last_loss = pt["loss"]
            n = pt["iter"] - self._last_display
            self._last_display = pt["iter"]
            sps = pt.get("samples_per_sec")
            if sps:
                secs = n * self._solver.batchsize / sps
            _log("Iter: %d Time(%d iters): %.6fs Loss: %.6f lr:%.6g" % (pt["iter"], n, secs, pt["loss"], pt.get("lr", 0)))
        if pt.get("eval_auc") is not None or pt.get("eval_loss") is not None:
            parts = []
            for k in self._solver.metrics_spec:
                if k.name == "AUC" and pt.get("eval_auc") is not None:
                    parts.append("AUC: %.6f" % pt["eval_auc"])
                elif k.name == "AverageLoss" and pt.get("eval_loss") is not None:
                    parts.append("AverageLoss: %.6f" % pt["eval_loss"])
            _log("Evaluation, " + ", ".join(parts or ["AUC: %.6f" % pt.get("eval_auc", float("nan"))]))
            tasks = pt.get("eval_tasks") or []
            if len(tasks) > 1 and any(k.name == "AUC" for k in self._solver.metrics_spec):
                # HugeCTR's print_class_aucs after a multi-label AUC.
                _log("Evaluation, AUC: {%s}" % ", ".join(
                    "%f" % (float("nan") if t.get("auc") is None else t["auc"]) for t in tasks))

    def get_training_plot(self):
        """The PNG of loss and AUC against iterations of the last fit (a
        path; None before fit)."""
        return self._plot

    # ---- sources

    def set_source(self, source=None, keyset=None, eval_source=None):
        """Sets the training (and evaluation) data for the next fit or
        low-level epoch: set_source(source, eval_source)."""
        if keyset and eval_source is None and isinstance(keyset, str) and not isinstance(source, list):
            eval_source, keyset = keyset, None  # set_source(source, eval_source) positionally
        if keyset:
            raise NotImplementedError("keyset: keyset files serve HugeCTR's Embedding Training Cache, which ctrkit "
                                      "has not (see hugectr.CreateETC)")
        if source is not None:
            self._reader.source = _strs(source, "source")
        if eval_source is not None:
            self._reader.eval_source = eval_source
        if self._sess is not None:
            kw = {}
            if source is not None:
                if len(self._reader.source) != 1:
                    raise ValueError("set_source: the low-level loop reads one file list at a time")
                kw["source"] = self._reader.source[0]
            if eval_source is not None:
                kw["eval_source"] = eval_source
            self._sess.request("set_source", **kw)
            self._eof = False
        self._compiled = self._compiled and self._sess is None

    # ---- weights and freezing

    def load_dense_weights(self, dense_model_file):
        self._require(dense_model_file)
        self._init["dense"] = dense_model_file
        if self._sess is not None:
            self._sess.request("load_dense_weights", file=dense_model_file)

    def load_dense_optimizer_states(self, dense_opt_states_file):
        self._require(dense_opt_states_file)
        self._init["dense_opt"] = dense_opt_states_file
        if self._sess is not None:
            self._sess.request("load_dense_optimizer_states", file=dense_opt_states_file)

    def _by_name(self, files, what):
        names = [e["top"] for e in self._embeddings]
        if isinstance(files, dict):
            for n in files:
                if n not in names:
                    raise ValueError("%s: no embedding %r (the model has %s)" % (what, n, names))
            return dict(files)
        files = list(files)
        if len(files) != len(names):
            raise ValueError("%s: %d files for %d embeddings" % (what, len(files), len(names)))
        return dict(zip(names, files))

    @staticmethod
    def _require(path):
        if not os.path.exists(path):
            raise FileNotFoundError("%s: no such file or directory" % path)

    def load_sparse_weights(self, sparse_embedding_files=None, sparse_embedding_files_map=None):
        """Loads embedding tables: a list (one per embedding) or a dict
        from embedding name to file (HugeCTR's two overloads: the list
        sparse_embedding_files, the dict sparse_embedding_files_map)."""
        sparse_embedding_files = _one_of("load_sparse_weights", "sparse_embedding_files", sparse_embedding_files,
                                         "sparse_embedding_files_map", sparse_embedding_files_map)
        m = self._by_name(sparse_embedding_files, "load_sparse_weights")
        for p in m.values():
            self._require(p)
        self._init["sparse"].update(m)
        if self._sess is not None:
            self._sess.request("load_sparse_weights", files_map=m)

    def load_sparse_optimizer_states(self, sparse_opt_states_files=None, sparse_opt_states_files_map=None):
        """Loads embedding optimizer states (with the tables they belong
        to: load_sparse_weights first): a list or, as
        sparse_opt_states_files_map, a dict by embedding name."""
        sparse_opt_states_files = _one_of("load_sparse_optimizer_states", "sparse_opt_states_files",
                                          sparse_opt_states_files, "sparse_opt_states_files_map",
                                          sparse_opt_states_files_map)
        m = self._by_name(sparse_opt_states_files, "load_sparse_optimizer_states")
        for n, p in m.items():
            self._require(p)
            if n not in self._init["sparse"]:
                raise ValueError("load_sparse_optimizer_states %s: load its table with load_sparse_weights first "
                                 "(the states belong to those rows)" % n)
        self._init["sparse_opt"].update(m)
        if self._sess is not None:
            names = [e["top"] for e in self._embeddings]
            self._sess.request("load_sparse_weights",
                               files=[self._init["sparse"].get(n, "") for n in names],
                               opt_files=[m.get(n, "") for n in names])

    def freeze_dense(self):
        self._freeze_dense = True
        if self._sess is not None:
            self._sess.request("freeze_dense")

    def unfreeze_dense(self):
        self._freeze_dense = False
        if self._sess is not None:
            self._sess.request("unfreeze_dense")

    def freeze_embedding(self, embedding_name=None):
        names = [e["top"] for e in self._embeddings]
        if embedding_name is None:
            self._freeze_all = True
        elif embedding_name not in names:
            raise ValueError("freeze_embedding: no embedding %r (the model has %s)" % (embedding_name, names))
        else:
            self._frozen.add(embedding_name)
        if self._sess is not None:
            self._sess.request("freeze_embedding", name=embedding_name or "")

    def unfreeze_embedding(self, embedding_name=None):
        names = [e["top"] for e in self._embeddings]
        if embedding_name is None:
            self._freeze_all = False
            self._frozen.clear()
        elif embedding_name not in names:
            raise ValueError("unfreeze_embedding: no embedding %r (the model has %s)" % (embedding_name, names))
        else:
            if self._freeze_all:
                self._freeze_all = False
                self._frozen = set(names)
            self._frozen.discard(embedding_name)
        if self._sess is not None:
            self._sess.request("unfreeze_embedding", name=embedding_name or "")

    # ---- the low-level API (one ctrkit session)

    def _session(self):
        if self._sess is None:
            if not self._compiled:
                self.compile()
            s = _proc.Session()
            try:
                s.request("load", args=self._train_flags(session=True), repeat=bool(self._solver.repeat_dataset))
            except CtrkitError:
                s.close()
                raise
            self._sess = s
            self._eof = False
        return self._sess

    def _close_session(self):
        if self._sess is not None:
            self._sess.close()
            self._sess = None

    def get_learning_rate_scheduler(self):
        self._session()
        return LearningRateScheduler(self)

    def get_data_reader_train(self):
        self._session()
        return DataReader(self, True)

    def get_data_reader_eval(self):
        self._session()
        return DataReader(self, False)

    def start_data_reading(self):
        """Starts the readers (non-epoch mode) before the training loop."""
        self._session().request("start_data_reading")
        self._eof = False

    def set_learning_rate(self, lr):
        self._session().request("set_lr", lr=float(lr))

    def train(self):
        """One iteration on the next training batch; False when the
        training data is exhausted (epoch mode)."""
        r = self._session().request("train")
        self._eof = r.get("eof", False)
        return bool(r["trained"])

    def get_current_loss(self):
        """The loss of the last iteration (nan when it is not finite)."""
        v = self._session().request("loss")["loss"]
        return float("nan") if v is None else v

    def eval(self):
        """Counts one evaluation batch (of batchsize_eval); get_eval_metrics
        evaluates the batches counted since the last call, from the start
        of the eval source, as fit's evaluations do."""
        self._session()
        self._pending_eval += 1
        return True

    def get_eval_metrics(self):
        """[(metric name, value), …] of the solver's metrics_spec over the
        batches eval() counted."""
        if self._pending_eval == 0:
            raise ValueError("get_eval_metrics: call eval() once per evaluation batch first")
        n, self._pending_eval = self._pending_eval, 0
        r = self._session().request("eval", batches=n)
        self._eval_tasks = r.get("tasks")
        out = []
        for k in self._solver.metrics_spec:
            v = {"AUC": r.get("auc"), "AverageLoss": r.get("loss"), "HitRate": r.get("hit_rate")}[k.name]
            out.append((k.name, float("nan") if v is None else v))
        return out

    def get_eval_metrics_per_task(self):
        """ctrkit's addition for multi-task models: {label: [(metric name,
        value), …]} of the last get_eval_metrics, per loss layer (AUC: the
        task's, the mean over its columns for MultiCrossEntropyLoss;
        AverageLoss: its unweighted loss), for the metrics_spec's AUC and
        AverageLoss; get_eval_metrics gives HugeCTR's model-wide values
        (AUC the mean over the tasks' columns, AverageLoss Σ weight·loss).
        None before get_eval_metrics or for a model with one loss layer."""
        if not self._eval_tasks:
            return None
        nan = float("nan")
        out = {}
        for t in self._eval_tasks:
            ms = []
            for k in self._solver.metrics_spec:
                if k.name == "AUC":
                    ms.append(("AUC", nan if t.get("auc") is None else t["auc"]))
                elif k.name == "AverageLoss":
                    ms.append(("AverageLoss", nan if t.get("loss") is None else t["loss"]))
            out[t["label"]] = ms
        return out

    def export_predictions(self, output_prediction_file_name, output_label_file_name):
        """Writes the scores and labels of the last evaluation, one per line."""
        self._session().request("export_predictions", output=output_prediction_file_name,
                                labels=output_label_file_name)

    def save_params_to_files(self, prefix, iter=0):
        """Writes <prefix>_dense_<iter>.model, <prefix><i>_sparse_<iter>.model…
        and the optimizer states (HugeCTR's names)."""
        if self._sess is None:
            raise ValueError("save_params_to_files: nothing trained in this process yet (fit saves with its "
                             "snapshot and snapshot_prefix; the low-level loop with this method)")
        self._sess.request("save", prefix=prefix, iter=int(iter))

    def reset_learning_rate_scheduler(self, base_lr, warmup_steps=1, decay_start=0, decay_steps=1, decay_power=2.0,
                                      end_lr=0.0):
        """Replaces the learning-rate schedule (HugeCTR's checks)."""
        s = self._solver
        s.lr, s.warmup_steps, s.decay_start, s.decay_steps, s.decay_power, s.end_lr = (
            base_lr, warmup_steps, decay_start, decay_steps, decay_power, end_lr)
        if self._sess is not None:
            self._sess.request("reset_lr", lr=float(base_lr), warmup_steps=int(warmup_steps),
                               decay_start=int(decay_start), decay_steps=int(decay_steps),
                               decay_power=float(decay_power), end_lr=float(end_lr))
        self._compiled = False

    def get_incremental_model(self):
        raise NotImplementedError("get_incremental_model: ctrkit keeps no record of the embedding rows updated "
                                  "since the last call; save_params_to_files writes the whole model")

    def dump_incremental_model_2kafka(self):
        raise NotImplementedError("dump_incremental_model_2kafka: ctrkit does not stream models to Kafka; "
                                  "save them with Model.save_params_to_files")

    def get_embedding_training_cache(self):
        CreateETC(None)

    def embedding_dump(self, path, table_names=None):
        raise NotImplementedError("embedding_dump: it dumps EmbeddingCollection tables, which ctrkit has not; "
                                  "Model.save_params_to_files writes the SparseEmbedding tables")

    def embedding_load(self, path, table_names=None):
        raise NotImplementedError("embedding_load: it loads EmbeddingCollection tables, which ctrkit has not; "
                                  "Model.load_sparse_weights loads SparseEmbedding tables")

    def check_out_tensor(self, tensor_name, tensor_type):
        raise NotImplementedError("check_out_tensor: ctrkit's session does not copy out inner tensors; "
                                  "InferenceModel.predict gives the model's outputs")

    def __del__(self):
        try:
            self._close_session()
        except Exception:
            pass


from . import data, inference, tools  # noqa: E402
