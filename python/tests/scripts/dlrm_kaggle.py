# DLRM as HugeCTR's samples/dlrm/dlrm_kaggle_fp32.py declares it: Raw data
# read through DataReaderSparseParam("data1", 2, False, <slots>) (HugeCTR's
# Raw reader reads one key per slot whatever nnz_per_slot says), a one-hot
# localized embedding, SGD with atomic updates, a warmup, and HugeCTR's
# drop_incomplete_batch default. Sized for a test; only the import differs
# from a HugeCTR script.
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGeneratorParams, DataGenerator

slots = [40, 25, 60, 15, 35, 50]
DataGenerator(
    DataGeneratorParams(
        format=hugectr.DataReaderType_t.Raw,
        label_dim=1,
        dense_dim=13,
        num_slot=len(slots),
        i64_input_key=False,
        source="./kaggle/train_data.bin",
        eval_source="./kaggle/test_data.bin",
        slot_size_array=slots,
        check_type=hugectr.Check_t.Non,
        num_samples=3000,
        eval_num_samples=2048,
    )
).generate()

solver = hugectr.CreateSolver(
    max_eval_batches=2,
    batchsize_eval=500,
    batchsize=256,
    lr=0.5,
    warmup_steps=8,
    vvgpu=[[0]],
    repeat_dataset=True,
)
reader = hugectr.DataReaderParams(
    data_reader_type=hugectr.DataReaderType_t.Raw,
    source=["./kaggle/train_data.bin"],
    eval_source="./kaggle/test_data.bin",
    num_samples=3000,
    eval_num_samples=2048,
    check_type=hugectr.Check_t.Non,
    slot_size_array=slots,  # DataGenerator's Raw keys are slot-local
)
optimizer = hugectr.CreateOptimizer(
    optimizer_type=hugectr.Optimizer_t.SGD, update_type=hugectr.Update_t.Local, atomic_update=True
)
model = hugectr.Model(solver, reader, optimizer)
model.add(
    hugectr.Input(
        label_dim=1,
        label_name="label",
        dense_dim=13,
        dense_name="dense",
        data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 2, False, len(slots))],
    )
)
model.add(
    hugectr.SparseEmbedding(
        embedding_type=hugectr.Embedding_t.LocalizedSlotSparseEmbeddingOneHot,
        slot_size_array=slots,
        workspace_size_per_gpu_in_mb=1,
        embedding_vec_size=8,
        combiner="sum",
        sparse_embedding_name="sparse_embedding1",
        bottom_name="data1",
        optimizer=optimizer,
    )
)
for i, (bottom, width) in enumerate([("dense", 32), ("relu1", 16), ("relu2", 8)], 1):
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=[bottom],
                                 top_names=["fc%d" % i], num_output=width))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc%d" % i],
                                 top_names=["relu%d" % i]))
model.add(
    hugectr.DenseLayer(
        layer_type=hugectr.Layer_t.Interaction,
        bottom_names=["relu3", "sparse_embedding1"],
        top_names=["interaction1"],
    )
)
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["interaction1"],
                             top_names=["fc4"], num_output=32))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc4"], top_names=["relu4"]))
model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu4"],
                             top_names=["fc5"], num_output=1))
model.add(
    hugectr.DenseLayer(
        layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss,
        bottom_names=["fc5", "label"],
        top_names=["loss"],
    )
)
model.compile()
model.summary()
model.fit(max_iter=24, display=8, eval_interval=24, snapshot=24, snapshot_prefix="dlrm_kaggle")
model.graph_to_json(graph_config_file="dlrm_kaggle.json")
