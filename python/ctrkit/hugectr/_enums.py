"""HugeCTR's Python enums (HugeCTR/include/pybind/common_wrapper.hpp).
Each member's value is the string HugeCTR's JSON uses."""

import enum


class _E(enum.Enum):
    def __repr__(self):
        return "<%s.%s>" % (type(self).__name__, self.name)

    def __str__(self):
        return "%s.%s" % (type(self).__name__, self.name)


def _make(name, members):
    return _E(name, [(m, v) for m, v in members], module=__name__)


Check_t = _make("Check_t", [("Sum", "Sum"), ("Non", "None")])
DataReaderType_t = _make("DataReaderType_t", [("Norm", "Norm"), ("Raw", "Raw"), ("Parquet", "Parquet"),
                                              ("RawAsync", "RawAsync")])
FileSystemType_t = _make("FileSystemType_t", [("Local", "Local"), ("HDFS", "HDFS"), ("S3", "S3"), ("GCS", "GCS"),
                                              ("Other", "Other")])
SourceType_t = _make("SourceType_t", [("FileList", "FileList"), ("Mmap", "Mmap"), ("Parquet", "Parquet")])
TrainPSType_t = _make("TrainPSType_t", [("Staged", "Staged"), ("Cached", "Cached")])
Embedding_t = _make("Embedding_t", [
    ("DistributedSlotSparseEmbeddingHash", "DistributedSlotSparseEmbeddingHash"),
    ("LocalizedSlotSparseEmbeddingHash", "LocalizedSlotSparseEmbeddingHash"),
    ("LocalizedSlotSparseEmbeddingOneHot", "LocalizedSlotSparseEmbeddingOneHot"),
    ("HybridSparseEmbedding", "HybridSparseEmbedding")])
Initializer_t = _make("Initializer_t", [("Default", "Default"), ("Uniform", "Uniform"), ("XavierNorm", "XavierNorm"),
                                        ("XavierUniform", "XavierUniform"), ("Sinusoidal", "Sinusoidal"),
                                        ("Zero", "Zero")])
Layer_t = _make("Layer_t", [(n, n) for n in [
    "BatchNorm", "LayerNorm", "BinaryCrossEntropyLoss", "Reshape", "Select", "Concat", "CrossEntropyLoss",
    "Dropout", "ElementwiseMultiply", "ELU", "InnerProduct", "FusedInnerProduct", "MLP", "Interaction",
    "MultiCrossEntropyLoss", "ReLU", "ReLUHalf", "Sigmoid", "Slice", "WeightMultiply", "FmOrder2", "Add",
    "ReduceSum", "Softmax", "Gather", "PReLU_Dice", "GRU", "MatrixMultiply", "MultiHeadAttention", "Scale",
    "FusedReshapeConcat", "FusedReshapeConcatGeneral", "Sub", "ReduceMean", "MultiCross", "Cast",
    "SequenceMask"]])
GroupLayer_t = _make("GroupLayer_t", [("GroupFusedInnerProduct", "GroupFusedInnerProduct")])
Alignment_t = _make("Alignment_t", [("Auto", "Auto"), ("Non", "None")])
LrPolicy_t = _make("LrPolicy_t", [("fixed", "fixed")])
Optimizer_t = _make("Optimizer_t", [(n, n) for n in ["Ftrl", "Adam", "RMSProp", "AdaGrad", "MomentumSGD",
                                                     "Nesterov", "SGD"]])
Update_t = _make("Update_t", [("Local", "Local"), ("Global", "Global"), ("LazyGlobal", "LazyGlobal")])
Activation_t = _make("Activation_t", [("Relu", "Relu"), ("Non", "None")])
FcPosition_t = _make("FcPosition_t", [("Non", "None"), ("Head", "Head"), ("Body", "Body"), ("Tail", "Tail"),
                                      ("Isolated", "Isolated")])
Regularizer_t = _make("Regularizer_t", [("L1", "L1"), ("L2", "L2")])
MetricsRawType = _make("MetricsRawType", [("Loss", "Loss"), ("Pred", "Pred"), ("Label", "Label")])
MetricsType = _make("MetricsType", [("AUC", "AUC"), ("AverageLoss", "AverageLoss"), ("HitRate", "HitRate"),
                                    ("NDCG", "NDCG"), ("SMAPE", "SMAPE")])
DeviceLayout = _make("DeviceLayout", [("LocalFirst", "LocalFirst"), ("NodeFirst", "NodeFirst")])
AllReduceAlgo = _make("AllReduceAlgo", [("OneShot", "Oneshot"), ("NCCL", "NCCL")])
Distribution_t = _make("Distribution_t", [("Uniform", "Uniform"), ("PowerLaw", "PowerLaw")])
PowerLaw_t = _make("PowerLaw_t", [("Long", "Long"), ("Medium", "Medium"), ("Short", "Short"),
                                  ("Specific", "Specific")])
Tensor_t = _make("Tensor_t", [("Train", "Train"), ("Evaluate", "Evaluate")])
CommunicationType = _make("CommunicationType", [("IB_NVLink_Hier", "IB_NVLink_Hierarchical"),
                                                ("IB_NVLink", "IB_NVLink"),
                                                ("NVLink_SingleNode", "NVLink_SingleNode")])
HybridEmbeddingType = _make("HybridEmbeddingType", [("Distributed", "Distributed")])
Error_t = _make("Error_t", [(n, n) for n in [
    "Success", "FileCannotOpen", "BrokenFile", "OutOfMemory", "OutOfBound", "WrongInput", "IllegalCall",
    "NotInitialized", "UnSupportedFormat", "InvalidEnv", "MpiError", "CublasError", "CudnnError",
    "CudaDriverError", "CudaRuntimeError", "NcclError", "DataCheckError", "UnspecificError", "EndOfFile"]])

ALL = ["Check_t", "DataReaderType_t", "FileSystemType_t", "SourceType_t", "TrainPSType_t", "Embedding_t",
       "Initializer_t", "Layer_t", "GroupLayer_t", "Alignment_t", "LrPolicy_t", "Optimizer_t", "Update_t",
       "Activation_t", "FcPosition_t", "Regularizer_t", "MetricsRawType", "MetricsType", "DeviceLayout",
       "AllReduceAlgo", "Distribution_t", "PowerLaw_t", "Tensor_t", "CommunicationType", "HybridEmbeddingType",
       "Error_t"]


def value(e, enum_type, arg):
    """The JSON string of enum member e of enum_type; a clear TypeError
    naming arg otherwise."""
    if isinstance(e, enum_type):
        return e.value
    raise TypeError("%s: want a hugectr.%s member (e.g. hugectr.%s.%s), have %r"
                    % (arg, enum_type.__name__, enum_type.__name__, list(enum_type)[0].name, e))
