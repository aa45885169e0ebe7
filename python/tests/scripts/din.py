# DIN in the shape of HugeCTR's samples/din/din_parquet.py: a user slot, 11
# good and 11 category slots (10 history items and the target), the
# attention unit over FusedReshapeConcat's history and target (Scale, Sub,
# ElementwiseMultiply, Softmax, ReduceSum, ReduceMean), PReLU_Dice, and
# HugeCTR's automatic Slice for tensors several layers read. Norm data from
# DataGenerator, drop_incomplete_batch=False with a batch size that does not
# divide it. Sized for a test; only the import differs from a HugeCTR
# script.
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGeneratorParams, DataGenerator

DataGenerator(
    DataGeneratorParams(
        format=hugectr.DataReaderType_t.Norm,
        label_dim=1,
        dense_dim=0,
        num_slot=23,
        i64_input_key=True,
        source="./din_data/file_list.txt",
        eval_source="./din_data/file_list_test.txt",
        slot_size_array=[50] + [40] * 11 + [12] * 11,
        check_type=hugectr.Check_t.Sum,
        num_files=1,
        eval_num_files=1,
        num_samples_per_file=1000,
    )
).generate()

solver = hugectr.CreateSolver(
    max_eval_batches=2,
    batchsize_eval=256,
    batchsize=96,
    lr=0.001,
    vvgpu=[[0]],
    repeat_dataset=True,
    i64_input_key=True,
    drop_incomplete_batch=False,
)
reader = hugectr.DataReaderParams(
    data_reader_type=hugectr.DataReaderType_t.Norm,
    source=["./din_data/file_list.txt"],
    eval_source="./din_data/file_list_test.txt",
    check_type=hugectr.Check_t.Sum,
    num_workers=1,
)
optimizer = hugectr.CreateOptimizer(
    optimizer_type=hugectr.Optimizer_t.Adam,
    update_type=hugectr.Update_t.Global,
    beta1=0.9,
    beta2=0.999,
    epsilon=0.000000001,
)
model = hugectr.Model(solver, reader, optimizer)
model.add(
    hugectr.Input(
        label_dim=1,
        label_name="label",
        dense_dim=0,
        dense_name="dense",
        data_reader_sparse_param_array=[
            hugectr.DataReaderSparseParam("UserID", 1, True, 1),
            hugectr.DataReaderSparseParam("GoodID", 1, True, 11),
            hugectr.DataReaderSparseParam("CateID", 1, True, 11),
        ],
    )
)
for name, bottom, mb in (("user", "UserID", 1), ("good", "GoodID", 1), ("cate", "CateID", 1)):
    model.add(
        hugectr.SparseEmbedding(
            embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
            workspace_size_per_gpu_in_mb=mb,
            embedding_vec_size=8,
            combiner="sum",
            sparse_embedding_name="sparse_embedding_" + name,
            bottom_name=bottom,
            optimizer=optimizer,
        )
    )
L = hugectr.Layer_t


def dense(layer_type, bottoms, tops, **kw):
    model.add(hugectr.DenseLayer(layer_type=layer_type, bottom_names=bottoms, top_names=tops, **kw))


# History (10 items of good ⊕ category, 16 wide) and the target item.
dense(L.FusedReshapeConcat, ["sparse_embedding_good", "sparse_embedding_cate"], ["item_his_em", "item"])
dense(L.Scale, ["item"], ["scale_item"], axis=1, factor=10)
dense(L.Sub, ["scale_item", "item_his_em"], ["sub_ih"])
dense(L.ElementwiseMultiply, ["scale_item", "item_his_em"], ["mul_ih"])
dense(L.Concat, ["scale_item", "item_his_em", "sub_ih", "mul_ih"], ["concat_i_h"])
dense(L.InnerProduct, ["concat_i_h"], ["fc_att_1"], num_output=12)
dense(L.InnerProduct, ["fc_att_1"], ["fc_att_2"], num_output=1)
dense(L.Reshape, ["fc_att_2"], ["reshape_score"], leading_dim=10)
dense(L.Softmax, ["reshape_score"], ["softmax_att"])
dense(L.Scale, ["softmax_att"], ["scale_att"], axis=0, factor=16)
dense(L.Reshape, ["item_his_em"], ["reshape_item_his"], leading_dim=160)
dense(L.ElementwiseMultiply, ["scale_att", "reshape_item_his"], ["mul_att_his"])
dense(L.ReduceSum, ["mul_att_his"], ["reduce_ih"], axis=1)
dense(L.Reshape, ["item_his_em"], ["reshape_his"], leading_dim=16, time_step=10)
dense(L.ReduceMean, ["reshape_his"], ["reduce_his"], axis=1)
dense(L.Reshape, ["reduce_his"], ["reshape_reduce_his"], leading_dim=16)
dense(L.Reshape, ["sparse_embedding_user"], ["reshape_user"], leading_dim=8)
dense(L.Concat, ["reshape_user", "reshape_reduce_his", "reduce_ih", "item"], ["concat_din"])
dense(L.InnerProduct, ["concat_din"], ["fc_din_1"], num_output=32)
dense(L.PReLU_Dice, ["fc_din_1"], ["dice_1"], elu_alpha=0.2, eps=1e-8)
dense(L.InnerProduct, ["dice_1"], ["fc_din_2"], num_output=16)
dense(L.PReLU_Dice, ["fc_din_2"], ["dice_2"], elu_alpha=0.2, eps=1e-8)
dense(L.InnerProduct, ["dice_2"], ["fc_din_3"], num_output=1)
dense(L.BinaryCrossEntropyLoss, ["fc_din_3", "label"], ["loss"])
model.compile()
model.summary()
model.fit(max_iter=24, display=8, eval_interval=24, snapshot=24, snapshot_prefix="din")
model.graph_to_json(graph_config_file="din.json")
