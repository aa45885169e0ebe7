"""Multi-task models: HugeCTR's multi-label Input forms, compile(loss_names,
loss_weights) and Input(label_weights) as ctrkit's --loss-weights, trained
through fit and through the low-level loop, with per-task metrics."""

import math
import os
import shutil
import tempfile
import unittest

from tests import _util
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGenerator, DataGeneratorParams

SPARSE = [hugectr.DataReaderSparseParam("data1", 1, True, 6)]


def build(data, inp=None, weights=None, seed=3):
    """A shared-bottom two-task model (labels click and buy, one BCE loss
    each); weights: (names, weights) for compile."""
    solver = hugectr.CreateSolver(max_eval_batches=2, batchsize_eval=512, batchsize=256, lr=0.01, seed=seed,
                                  vvgpu=[[0]], repeat_dataset=True,
                                  metrics_spec={hugectr.MetricsType.AUC: 1.0, hugectr.MetricsType.AverageLoss: 0.0})
    reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                      source=[os.path.join(data, "file_list.txt")],
                                      eval_source=os.path.join(data, "file_list_test.txt"),
                                      check_type=hugectr.Check_t.Sum)
    optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
    model = hugectr.Model(solver, reader, optimizer)
    model.add(inp or hugectr.Input(label_dims=[1, 1], label_names=["click", "buy"], dense_dim=4,
                                   dense_name="dense", data_reader_sparse_param_array=SPARSE))
    model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                      workspace_size_per_gpu_in_mb=1, embedding_vec_size=8, combiner="sum",
                                      sparse_embedding_name="sparse_embedding1", bottom_name="data1",
                                      optimizer=optimizer))
    D, L = hugectr.DenseLayer, hugectr.Layer_t
    model.add(D(layer_type=L.Reshape, bottom_names=["sparse_embedding1"], top_names=["reshape1"], leading_dim=48))
    model.add(D(layer_type=L.Concat, bottom_names=["reshape1", "dense"], top_names=["concat1"]))
    model.add(D(layer_type=L.InnerProduct, bottom_names=["concat1"], top_names=["fc1"], num_output=16))
    model.add(D(layer_type=L.ReLU, bottom_names=["fc1"], top_names=["relu1"]))
    for task in ("click", "buy"):
        model.add(D(layer_type=L.InnerProduct, bottom_names=["relu1"], top_names=["fc_" + task], num_output=1))
        model.add(D(layer_type=L.BinaryCrossEntropyLoss, bottom_names=["fc_" + task, task],
                    top_names=["loss_" + task]))
    if weights:
        model.compile(loss_names=weights[0], loss_weights=weights[1])
    else:
        model.compile()
    return model


def low_level(model, iters):
    model.start_data_reading()
    lr_sch = model.get_learning_rate_scheduler()
    got = []
    for _ in range(iters):
        model.set_learning_rate(lr_sch.get_next())
        assert model.train()
        got.append(model.get_current_loss())
    return got


class MultiTaskTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _util.need_binary()
        cls.tmp = tempfile.mkdtemp(prefix="ctrkit-multitask-")
        cls.data = os.path.join(cls.tmp, "data")
        DataGenerator(DataGeneratorParams(
            format=hugectr.DataReaderType_t.Norm, label_dim=2, dense_dim=4, num_slot=6, i64_input_key=False,
            source=os.path.join(cls.data, "file_list.txt"), eval_source=os.path.join(cls.data, "file_list_test.txt"),
            slot_size_array=[40, 60, 20, 80, 30, 50], num_files=2, eval_num_files=1,
            num_samples_per_file=1000)).generate()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_fit_and_low_level(self):
        w = (["click", "buy"], [1.0, 0.5])
        hist = build(self.data, weights=w).fit(max_iter=40, display=1, eval_interval=40, snapshot=0)
        want = [p["loss"] for p in hist if p.get("loss") is not None]
        evals = [p for p in hist if p.get("eval_tasks")]
        self.assertEqual(len(want), 40)
        self.assertEqual(len(evals), 1)
        ev = evals[0]
        tasks = {t["label"]: t for t in ev["eval_tasks"]}
        self.assertEqual(sorted(tasks), ["buy", "click"])
        self.assertAlmostEqual(ev["eval_loss"], tasks["click"]["loss"] + 0.5 * tasks["buy"]["loss"], places=9)
        self.assertAlmostEqual(ev["eval_auc"], (tasks["click"]["auc"] + tasks["buy"]["auc"]) / 2, places=9)
        for t in tasks.values():
            self.assertGreater(t["auc"], 0.55)  # planted labels: the model learns both tasks

        # The low-level loop gives fit's losses (the weights reach the session).
        model = build(self.data, weights=w)
        self.assertEqual(low_level(model, 40), want)
        for _ in range(2):
            model.eval()
        metrics = model.get_eval_metrics()
        self.assertEqual([m[0] for m in metrics], ["AUC", "AverageLoss"])
        self.assertAlmostEqual(metrics[0][1], ev["eval_auc"], places=12)
        self.assertAlmostEqual(metrics[1][1], ev["eval_loss"], places=12)
        per = model.get_eval_metrics_per_task()
        self.assertEqual(sorted(per), ["buy", "click"])
        for label in ("click", "buy"):
            self.assertEqual(per[label], [("AUC", tasks[label]["auc"]), ("AverageLoss", tasks[label]["loss"])])

        # The weights change training: equal weights give other losses.
        other = build(self.data)
        self.assertIsNone(other.get_eval_metrics_per_task())
        self.assertNotEqual(low_level(other, 3), want[:3])

    def test_input_label_weights(self):
        # Input(label_dims, label_names, label_weights, …) positionally and
        # by keyword weighs as compile(loss_names, loss_weights) does.
        want = low_level(build(self.data, weights=(["buy"], [0.25])), 3)
        pos = hugectr.Input([1, 1], ["click", "buy"], [1.0, 0.25], 4, "dense", SPARSE)
        self.assertEqual(low_level(build(self.data, inp=pos), 3), want)
        kw = hugectr.Input(label_dims=[1, 1], label_names=["click", "buy"], label_weights=[1, 0.25], dense_dim=4,
                           dense_name="dense", data_reader_sparse_param_array=SPARSE)
        self.assertEqual(low_level(build(self.data, inp=kw), 3), want)
        # compile overrides the Input's weight; label_dim/label_name lists too.
        lists = hugectr.Input(label_dim=[1, 1], label_name=["click", "buy"], dense_dim=4, dense_name="dense",
                              data_reader_sparse_param_array=SPARSE)
        self.assertEqual(lists.label_names, ["click", "buy"])
        self.assertEqual(low_level(build(self.data, inp=pos, weights=(["buy"], [1.0])), 3),
                         low_level(build(self.data), 3))

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "label name not found: nope"):
            build(self.data, weights=(["nope"], [1.0]))
        with self.assertRaisesRegex(ValueError, "same number"):
            build(self.data, weights=(["click"], [1.0, 2.0]))
        for bad in (-1.0, math.inf, math.nan, 1e40, "x"):
            with self.assertRaisesRegex(ValueError, "weight"):
                build(self.data, weights=(["buy"], [bad]))
        with self.assertRaisesRegex(ValueError, "label_weights"):
            hugectr.Input([1, 1], ["click", "buy"], [1.0], 4, "dense", SPARSE)
        with self.assertRaisesRegex(ValueError, "label dims"):
            hugectr.Input(label_dims=[1, 1], label_names=["click"], dense_dim=4, dense_name="dense",
                          data_reader_sparse_param_array=SPARSE)
        with self.assertRaisesRegex(TypeError, "unexpected argument"):
            hugectr.Input(label_dim=1, label_name="label", label_weight=[1.0], dense_dim=4, dense_name="dense",
                          data_reader_sparse_param_array=SPARSE)
        with self.assertRaisesRegex(TypeError, "both"):
            build(self.data).compile(loss_names=["buy"])


if __name__ == "__main__":
    unittest.main()
