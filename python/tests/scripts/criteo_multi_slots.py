# HugeCTR's samples/criteo_multi_slots/criteo_multi_slots.py in shape: Norm
# data of 10 multi-hot slots and no dense features, one hash embedding with
# the mean combiner, an MLP over the reshaped embedding, Adam with local
# updates and vvgpu of two GPUs (ctrkit trains on both where they exist,
# else on one device with the embedding's capacity of both). Sized for a
# test; only the import differs from a HugeCTR script.
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGeneratorParams, DataGenerator

DataGenerator(
    DataGeneratorParams(
        format=hugectr.DataReaderType_t.Norm,
        label_dim=1,
        dense_dim=0,
        num_slot=10,
        i64_input_key=False,
        source="./criteo_data/file_list.txt",
        eval_source="./criteo_data/file_list_test.txt",
        slot_size_array=[30, 60, 20, 45, 80, 15, 25, 70, 40, 50],
        nnz_array=[4, 2, 3, 1, 5, 2, 3, 4, 2, 3],
        check_type=hugectr.Check_t.Sum,
        num_files=2,
        eval_num_files=1,
        num_samples_per_file=2048,
    )
).generate()

solver = hugectr.CreateSolver(
    max_eval_batches=4,
    batchsize_eval=256,
    batchsize=256,
    lr=0.01,
    vvgpu=[[0, 1]],
    repeat_dataset=True,
)
reader = hugectr.DataReaderParams(
    data_reader_type=hugectr.DataReaderType_t.Norm,
    source=["./criteo_data/file_list.txt"],
    eval_source="./criteo_data/file_list_test.txt",
    check_type=hugectr.Check_t.Sum,
)
optimizer = hugectr.CreateOptimizer(
    optimizer_type=hugectr.Optimizer_t.Adam,
    update_type=hugectr.Update_t.Local,
    beta1=0.9,
    beta2=0.999,
    epsilon=0.0000001,
)
model = hugectr.Model(solver, reader, optimizer)
model.add(
    hugectr.Input(
        label_dim=1,
        label_name="label",
        dense_dim=0,
        dense_name="dense",
        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 5, False, 10)],
    )
)
model.add(
    hugectr.SparseEmbedding(
        embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
        workspace_size_per_gpu_in_mb=1,
        embedding_vec_size=8,
        combiner="mean",
        sparse_embedding_name="sparse_embedding1",
        bottom_name="data1",
        optimizer=optimizer,
    )
)
model.add(
    hugectr.DenseLayer(
        layer_type=hugectr.Layer_t.Reshape,
        bottom_names=["sparse_embedding1"],
        top_names=["reshape1"],
        leading_dim=80,
    )
)
bottom = "reshape1"
for i in (1, 2, 3):
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[bottom],
                                 top_names=["fc%d" % i], num_output=32))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc%d" % i],
                                 top_names=["relu%d" % i]))
    bottom = "relu%d" % i
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu3"],
                             top_names=["fc4"], num_output=1))
model.add(
    hugectr.DenseLayer(
        layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss,
        bottom_names=["fc4", "label"],
        top_names=["loss"],
    )
)
model.compile()
model.summary()
model.fit(max_iter=24, display=8, eval_interval=24, snapshot=24, snapshot_prefix="criteo_multi_slots")
model.graph_to_json(graph_config_file="criteo_multi_slots.json")
