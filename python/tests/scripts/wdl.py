# Wide & Deep in HugeCTR's documented style (samples/wdl), sized for a test:
# only the import differs from a HugeCTR script.
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGeneratorParams, DataGenerator

data_generator_params = DataGeneratorParams(
    format=hugectr.DataReaderType_t.Norm,
    label_dim=1,
    dense_dim=13,
    num_slot=27,
    i64_input_key=False,
    source="./wdl_data/file_list.txt",
    eval_source="./wdl_data/file_list_test.txt",
    slot_size_array=[100] * 27,
    nnz_array=[2] * 27,
    check_type=hugectr.Check_t.Sum,
    dist_type=hugectr.Distribution_t.PowerLaw,
    power_law_type=hugectr.PowerLaw_t.Short,
    num_files=2,
    eval_num_files=1,
    num_samples_per_file=2048,
)
data_generator = DataGenerator(data_generator_params)
data_generator.generate()

solver = hugectr.CreateSolver(
    max_eval_batches=2,
    batchsize_eval=512,
    batchsize=256,
    lr=0.001,
    vvgpu=[[0]],
    repeat_dataset=True,
    seed=11,
)
reader = hugectr.DataReaderParams(
    data_reader_type=hugectr.DataReaderType_t.Norm,
    source=["./wdl_data/file_list.txt"],
    eval_source="./wdl_data/file_list_test.txt",
    check_type=hugectr.Check_t.Sum,
)
optimizer = hugectr.CreateOptimizer(
    optimizer_type=hugectr.Optimizer_t.Adam,
    update_type=hugectr.Update_t.Global,
    beta1=0.9,
    beta2=0.999,
    epsilon=0.0000001,
)
model = hugectr.Model(solver, reader, optimizer)
model.add(
    hugectr.Input(
        label_dim=1,
        label_name="label",
        dense_dim=13,
        dense_name="dense",
        data_reader_sparse_param_array=[
            hugectr.DataReaderSparseParam("wide_data", 2, True, 1),
            hugectr.DataReaderSparseParam("deep_data", 2, False, 26),
        ],
    )
)
model.add(
    hugectr.SparseEmbedding(
        embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
        workspace_size_per_gpu_in_mb=1,
        embedding_vec_size=1,
        combiner="sum",
        sparse_embedding_name="sparse_embedding2",
        bottom_name="wide_data",
        optimizer=optimizer,
    )
)
model.add(
    hugectr.SparseEmbedding(
        embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
        workspace_size_per_gpu_in_mb=2,
        embedding_vec_size=8,
        combiner="sum",
        sparse_embedding_name="sparse_embedding1",
        bottom_name="deep_data",
        optimizer=optimizer,
    )
)
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=208))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding2"],
                             top_names=["reshape2"], leading_dim=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["concat1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat1"],
                             top_names=["fc1"], num_output=32))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc1"], top_names=["relu1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Dropout, bottom_names=["relu1"], top_names=["dropout1"],
                             dropout_rate=0.5))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["dropout1"],
                             top_names=["fc2"], num_output=32))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc2"], top_names=["relu2"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Dropout, bottom_names=["relu2"], top_names=["dropout2"],
                             dropout_rate=0.5))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["dropout2"],
                             top_names=["fc3"], num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Add, bottom_names=["fc3", "reshape2"],
                             top_names=["add1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["add1", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=24, display=8, eval_interval=12, snapshot=24, snapshot_prefix="wdl")
model.graph_to_json(graph_config_file="wdl.json")
