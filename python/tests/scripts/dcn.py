# Deep & Cross in HugeCTR's documented style (samples/dcn), sized for a
# test: only the import differs from a HugeCTR script. concat1 feeds two
# layers, so graph_to_json writes HugeCTR's automatic Slice.
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGeneratorParams, DataGenerator

data_generator_params = DataGeneratorParams(
    format=hugectr.DataReaderType_t.Norm,
    label_dim=1,
    dense_dim=13,
    num_slot=26,
    i64_input_key=False,
    source="./dcn_data/file_list.txt",
    eval_source="./dcn_data/file_list_test.txt",
    slot_size_array=[200] * 26,
    nnz_array=[2] * 26,
    num_files=2,
    eval_num_files=1,
    num_samples_per_file=2048,
)
DataGenerator(data_generator_params).generate()

solver = hugectr.CreateSolver(
    max_eval_batches=2,
    batchsize_eval=512,
    batchsize=256,
    lr=0.001,
    vvgpu=[[0]],
    repeat_dataset=True,
)
reader = hugectr.DataReaderParams(
    data_reader_type=hugectr.DataReaderType_t.Norm,
    source=["./dcn_data/file_list.txt"],
    eval_source="./dcn_data/file_list_test.txt",
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
        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 2, False, 26)],
    )
)
model.add(
    hugectr.SparseEmbedding(
        embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
        workspace_size_per_gpu_in_mb=2,
        embedding_vec_size=8,
        combiner="sum",
        sparse_embedding_name="sparse_embedding1",
        bottom_name="data1",
        optimizer=optimizer,
    )
)
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                             top_names=["reshape1"], leading_dim=208))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                             top_names=["concat1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.MultiCross, bottom_names=["concat1"],
                             top_names=["multicross1"], num_layers=3))
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
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["dropout2", "multicross1"],
                             top_names=["concat2"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat2"],
                             top_names=["fc3"], num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc3", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=24, display=8, eval_interval=12, snapshot=24, snapshot_prefix="dcn")
model.graph_to_json(graph_config_file="dcn.json")
