# DLRM in HugeCTR's documented style (samples/dlrm/dlrm_kaggle_fp32.py:
# Raw data, one-hot localized embedding, SGD, warmup), sized for a test:
# only the import differs from a HugeCTR script.
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGeneratorParams, DataGenerator

slot_size_array = [50, 30, 80, 20, 60, 40, 10, 70]
data_generator_params = DataGeneratorParams(
    format=hugectr.DataReaderType_t.Raw,
    label_dim=1,
    dense_dim=13,
    num_slot=8,
    i64_input_key=False,
    source="./dlrm_data/train_data.bin",
    eval_source="./dlrm_data/test_data.bin",
    slot_size_array=slot_size_array,
    nnz_array=[1] * 8,
    check_type=hugectr.Check_t.Non,
    num_samples=4096,
    eval_num_samples=1024,
)
DataGenerator(data_generator_params).generate()

solver = hugectr.CreateSolver(
    max_eval_batches=2,
    batchsize_eval=512,
    batchsize=256,
    lr=0.5,
    warmup_steps=10,
    vvgpu=[[0]],
    repeat_dataset=True,
)
reader = hugectr.DataReaderParams(
    data_reader_type=hugectr.DataReaderType_t.Raw,
    source=["./dlrm_data/train_data.bin"],
    eval_source="./dlrm_data/test_data.bin",
    num_samples=4096,
    eval_num_samples=1024,
    check_type=hugectr.Check_t.Non,
    slot_size_array=slot_size_array,
)
optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.SGD, update_type=hugectr.Update_t.Local,
                                    atomic_update=True)
model = hugectr.Model(solver, reader, optimizer)
model.add(
    hugectr.Input(
        label_dim=1,
        label_name="label",
        dense_dim=13,
        dense_name="dense",
        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 8)],
    )
)
model.add(
    hugectr.SparseEmbedding(
        embedding_type=hugectr.Embedding_t.LocalizedSlotSparseEmbeddingOneHot,
        slot_size_array=slot_size_array,
        workspace_size_per_gpu_in_mb=1,
        embedding_vec_size=16,
        combiner="sum",
        sparse_embedding_name="sparse_embedding1",
        bottom_name="data1",
        optimizer=optimizer,
    )
)
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["dense"], top_names=["fc1"],
                             num_output=64))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc1"], top_names=["relu1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu1"], top_names=["fc2"],
                             num_output=16))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc2"], top_names=["relu2"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Interaction, bottom_names=["relu2", "sparse_embedding1"],
                             top_names=["interaction1"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["interaction1"],
                             top_names=["fc3"], num_output=64))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc3"], top_names=["relu3"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu3"], top_names=["fc4"],
                             num_output=1))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc4", "label"],
                             top_names=["loss"]))
model.compile()
model.summary()
model.fit(max_iter=24, display=8, eval_interval=12, snapshot=24, snapshot_prefix="dlrm")
model.graph_to_json(graph_config_file="dlrm.json")
