"""hugectr.tools: DataGenerator on `ctrkit gen`."""

from .. import _proc
from . import _enums
from ._enums import value as _ev

__all__ = ["DataGeneratorParams", "DataGenerator"]


class DataGeneratorParams(object):
    """HugeCTR's DataGeneratorParams (HugeCTR/include/pybind/data_generator_wrapper.hpp)."""

    def __init__(self, format, label_dim, dense_dim, num_slot, i64_input_key, source, eval_source, slot_size_array,
                 nnz_array=None, check_type=_enums.Check_t.Sum, dist_type=_enums.Distribution_t.PowerLaw,
                 power_law_type=_enums.PowerLaw_t.Specific, alpha=1.2, num_files=128, eval_num_files=32,
                 num_samples_per_file=40960, num_samples=5242880, eval_num_samples=1310720,
                 float_label_dense=False, num_threads=1):
        self.format = format
        self.label_dim = label_dim
        self.dense_dim = dense_dim
        self.num_slot = num_slot
        self.i64_input_key = i64_input_key
        self.source = source
        self.eval_source = eval_source
        self.slot_size_array = list(slot_size_array)
        self.nnz_array = list(nnz_array or [])
        self.check_type = check_type
        self.dist_type = dist_type
        self.power_law_type = power_law_type
        self.alpha = alpha
        self.num_files = num_files
        self.eval_num_files = eval_num_files
        self.num_samples_per_file = num_samples_per_file
        self.num_samples = num_samples
        self.eval_num_samples = eval_num_samples
        self.float_label_dense = float_label_dense
        self.num_threads = num_threads


def _csv(v):
    return ",".join(str(int(x)) for x in v)


class DataGenerator(object):
    """HugeCTR's DataGenerator: generate() writes the train and eval sets
    (ctrkit gen; its labels come from a planted logistic model, so a model
    can learn them)."""

    def __init__(self, data_generator_params):
        if not isinstance(data_generator_params, DataGeneratorParams):
            raise TypeError("DataGenerator: want a hugectr.tools.DataGeneratorParams")
        self.params = data_generator_params

    def _args(self):
        p = self.params
        fmt = _ev(p.format, _enums.DataReaderType_t, "format")
        if fmt == "RawAsync":
            raise ValueError("DataGeneratorParams format RawAsync: generate DataReaderType_t.Raw data (the "
                             "RawAsync reader reads Raw files)")
        a = ["gen", "--format", fmt.lower(), "--label-dim", str(p.label_dim), "--dense-dim", str(p.dense_dim),
             "--num-slot", str(p.num_slot), "--out-source", p.source, "--out-eval-source", p.eval_source,
             "--slot-size-array", _csv(p.slot_size_array),
             "--check-type", _ev(p.check_type, _enums.Check_t, "check_type").lower(),
             "--dist-type", _ev(p.dist_type, _enums.Distribution_t, "dist_type").lower(),
             "--power-law-type", _ev(p.power_law_type, _enums.PowerLaw_t, "power_law_type").lower(),
             "--alpha", repr(float(p.alpha)), "--num-workers", str(max(int(p.num_threads), 1)), "--force"]
        if p.i64_input_key:
            a.append("--i64-input-key")
        if p.nnz_array:
            a += ["--nnz-array", _csv(p.nnz_array)]
        if fmt == "Raw":
            a += ["--num-samples", str(p.num_samples), "--eval-num-samples", str(p.eval_num_samples)]
            if p.float_label_dense:
                a.append("--float-label-dense")
        else:
            a += ["--num-files", str(p.num_files), "--eval-num-files", str(p.eval_num_files),
                  "--num-samples-per-file", str(p.num_samples_per_file)]
        return a

    def generate(self):
        """Writes the data; prints ctrkit gen's summary and returns it."""
        out = _proc.run(self._args())
        print(out, end="")
        return out
