"""The low-level loop (one ctrkit session) against fit on the same data
and seed, epoch mode with is_eof, saving and errors."""

import os
import shutil
import tempfile
import unittest

from tests import _util
import ctrkit.hugectr as hugectr
from ctrkit.hugectr.tools import DataGenerator, DataGeneratorParams


def build(data, repeat=True, batchsize=256, drop=True):
    solver = hugectr.CreateSolver(max_eval_batches=2, batchsize_eval=512, batchsize=batchsize, lr=0.01, seed=3,
                                  vvgpu=[[0]], repeat_dataset=repeat, drop_incomplete_batch=drop)
    reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                      source=[os.path.join(data, "file_list.txt")],
                                      eval_source=os.path.join(data, "file_list_test.txt"),
                                      check_type=hugectr.Check_t.Sum)
    optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
    model = hugectr.Model(solver, reader, optimizer)
    model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=4, dense_name="dense",
                            data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 6)]))
    model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                      workspace_size_per_gpu_in_mb=1, embedding_vec_size=8, combiner="sum",
                                      sparse_embedding_name="sparse_embedding1", bottom_name="data1",
                                      optimizer=optimizer))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                                 top_names=["reshape1"], leading_dim=48))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Concat, bottom_names=["reshape1", "dense"],
                                 top_names=["concat1"]))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["concat1"],
                                 top_names=["fc1"], num_output=16))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.ReLU, bottom_names=["fc1"], top_names=["relu1"]))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["relu1"],
                                 top_names=["fc2"], num_output=1))
    model.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc2", "label"],
                                 top_names=["loss"]))
    model.compile()
    return model


class LowLevelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _util.need_binary()
        cls.tmp = tempfile.mkdtemp(prefix="ctrkit-lowlevel-")
        cls.data = os.path.join(cls.tmp, "data")
        DataGenerator(DataGeneratorParams(
            format=hugectr.DataReaderType_t.Norm, label_dim=1, dense_dim=4, num_slot=6, i64_input_key=False,
            source=os.path.join(cls.data, "file_list.txt"), eval_source=os.path.join(cls.data, "file_list_test.txt"),
            slot_size_array=[40, 60, 20, 80, 30, 50], num_files=2, eval_num_files=1,
            num_samples_per_file=1000)).generate()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_matches_fit(self):
        fit = build(self.data)
        hist = fit.fit(max_iter=10, display=1, eval_interval=10, snapshot=0)
        want = [p["loss"] for p in hist if p.get("loss") is not None]
        want_auc = [p["eval_auc"] for p in hist if p.get("eval_auc") is not None]
        self.assertEqual(len(want), 10)
        self.assertTrue(os.path.exists(fit.get_training_plot()))

        model = build(self.data)
        model.start_data_reading()
        lr_sch = model.get_learning_rate_scheduler()
        got = []
        for i in range(10):
            lr = lr_sch.get_next()
            model.set_learning_rate(lr)
            self.assertTrue(model.train())
            got.append(model.get_current_loss())
        self.assertEqual(got, want)
        for _ in range(2):
            model.eval()
        metrics = model.get_eval_metrics()
        self.assertEqual(metrics, [("AUC", want_auc[0])])
        # export_predictions: the last evaluation's scores (2 × 512 asked,
        # the eval set holds 1000).
        pred, lab = os.path.join(self.tmp, "pred"), os.path.join(self.tmp, "label")
        model.export_predictions(pred, lab)
        self.assertEqual(len(_util.read_rows(pred)), 1000)
        self.assertEqual(set(r[0] for r in _util.read_rows(lab)) <= {0.0, 1.0}, True)
        # save_params_to_files writes HugeCTR's names, which load back.
        prefix = os.path.join(self.tmp, "low")
        model.save_params_to_files(prefix, 10)
        for f in ["low_dense_10.model", "low_opt_dense_10.model", "low0_sparse_10.model"]:
            self.assertTrue(os.path.exists(os.path.join(self.tmp, f)), f)
        again = build(self.data)
        again.load_dense_weights(prefix + "_dense_10.model")
        again.load_sparse_weights({"sparse_embedding1": prefix + "0_sparse_10.model"})
        for _ in range(2):
            again.eval()
        self.assertEqual(again.get_eval_metrics(), metrics)

    def test_epoch_mode(self):
        # repeat_dataset=False: an epoch ends at the data's end. The short
        # last batch (2000 = 7 × 256 + 208) is skipped by default and trained
        # with drop_incomplete_batch=False (HugeCTR's Model::read_a_batch),
        # by fit and the low-level loop alike.
        for drop, batches in ((True, 7), (False, 8)):
            fit = build(self.data, repeat=False, drop=drop)
            hist = fit.fit(num_epochs=1, display=1, eval_interval=0, snapshot=0)
            want = [p["loss"] for p in hist if p.get("loss") is not None]
            self.assertEqual(len(want), batches)
            model = build(self.data, repeat=False, drop=drop)
            reader = model.get_data_reader_train()
            got = []
            for epoch in range(2):
                reader.set_source()
                n = 0
                while True:
                    model.set_learning_rate(0.01)
                    if not model.train():
                        break
                    n += 1
                    if epoch == 0:
                        got.append(model.get_current_loss())
                    if reader.is_eof():
                        break
                self.assertEqual(n, batches, "drop_incomplete_batch=%s" % drop)
            self.assertEqual(got, want)
            self.assertFalse(model.train())

    def test_drop_incomplete_batch_max_iter(self):
        # drop_incomplete_batch=False in max_iter mode (HugeCTR's DLRM
        # samples; was refused): each pass trains its short last batch too,
        # by fit and the low-level loop alike.
        fit = build(self.data, drop=False)
        hist = fit.fit(max_iter=10, display=1, eval_interval=0, snapshot=0)
        want = [p["loss"] for p in hist if p.get("loss") is not None]
        model = build(self.data, drop=False)
        model.start_data_reading()
        got = []
        for _ in range(10):
            model.set_learning_rate(0.01)
            self.assertTrue(model.train())
            got.append(model.get_current_loss())
        self.assertEqual(got, want)
        full = [p["loss"] for p in build(self.data).fit(max_iter=10, display=1, eval_interval=0, snapshot=0)
                if p.get("loss") is not None]
        self.assertEqual(full[:7], want[:7])
        self.assertNotEqual(full[7], want[7])  # batch 8 is the short one (208 of 256): the models part

    def test_inference_non_trainable_params_file(self):
        # InferenceParams.non_trainable_params_file names the BatchNorm
        # running statistics (ctrkit's default: beside the dense file).
        solver = hugectr.CreateSolver(max_eval_batches=2, batchsize_eval=512, batchsize=256, lr=0.01, seed=3,
                                      vvgpu=[[0]])
        reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                          source=[os.path.join(self.data, "file_list.txt")],
                                          eval_source=os.path.join(self.data, "file_list_test.txt"),
                                          check_type=hugectr.Check_t.Sum)
        optimizer = hugectr.CreateOptimizer(optimizer_type=hugectr.Optimizer_t.Adam)
        model = hugectr.Model(solver, reader, optimizer)
        model.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=4, dense_name="dense",
                                data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("data1", 1, True, 6)]))
        model.add(hugectr.SparseEmbedding(embedding_type=hugectr.Embedding_t.DistributedSlotSparseEmbeddingHash,
                                          workspace_size_per_gpu_in_mb=1, embedding_vec_size=4, combiner="sum",
                                          sparse_embedding_name="sparse_embedding1", bottom_name="data1",
                                          optimizer=optimizer))
        L = hugectr.Layer_t
        for t, b, top, kw in [(L.Reshape, ["sparse_embedding1"], ["r"], dict(leading_dim=24)),
                              (L.Concat, ["r", "dense"], ["c"], {}),
                              (L.InnerProduct, ["c"], ["fc1"], dict(num_output=8)),
                              (L.BatchNorm, ["fc1"], ["bn"], {}),
                              (L.ReLU, ["bn"], ["relu"], {}),
                              (L.InnerProduct, ["relu"], ["fc2"], dict(num_output=1)),
                              (L.BinaryCrossEntropyLoss, ["fc2", "label"], ["loss"], {})]:
            model.add(hugectr.DenseLayer(layer_type=t, bottom_names=b, top_names=top, **kw))
        d = tempfile.mkdtemp(dir=self.tmp)
        prefix = os.path.join(d, "bn")
        model.fit(max_iter=4, display=0, eval_interval=0, snapshot=4, snapshot_prefix=prefix)
        graph = os.path.join(d, "bn.json")
        model.graph_to_json(graph)
        dense = prefix + "_dense_4.model"
        self.assertTrue(os.path.exists(dense + ".ntp.json"))

        def predict(**kw):
            p = hugectr.inference.InferenceParams(
                model_name="bn", max_batchsize=256, hit_rate_threshold=1.0, dense_model_file=dense,
                sparse_model_files=[prefix + "0_sparse_4.model"], use_gpu_embedding_cache=False,
                cache_size_percentage=1.0, i64_input_key=False, **kw)
            return [list(map(float, r)) for r in hugectr.inference.InferenceModel(graph, p).predict(
                1, os.path.join(self.data, "file_list_test.txt"), hugectr.DataReaderType_t.Norm, hugectr.Check_t.Sum)]

        want = predict()
        moved = os.path.join(d, "stats.json")
        os.rename(dense + ".ntp.json", moved)
        with self.assertRaises(hugectr.CtrkitError) as cm:
            predict()
        self.assertIn("running mean and variance", str(cm.exception))
        self.assertEqual(predict(non_trainable_params_file=moved), want)

    def test_fit_continues_the_session(self):
        # fit after low-level steps trains on from the session's model (its
        # weights, optimizer state and iteration; the data from its start).
        model = build(self.data)
        model.start_data_reading()
        for _ in range(4):
            model.train()
        hist = model.fit(max_iter=8, display=1, eval_interval=0, snapshot=0)
        self.assertEqual([p["iter"] for p in hist if p.get("loss") is not None], [5, 6, 7, 8])
        ref = build(self.data)
        want = [p["loss"] for p in ref.fit(max_iter=4, display=1, eval_interval=0, snapshot=0)]
        self.assertEqual(len(want), 4)
        self.assertTrue(all(a != b for a, b in zip(want, [p["loss"] for p in hist])))

    def test_freeze(self):
        # A frozen dense network leaves the dense file as loaded; the
        # embedding still trains (fit passes --freeze-dense, the session
        # freeze_dense).
        src = build(self.data)
        src.start_data_reading()
        src.train()
        prefix = os.path.join(self.tmp, "frz")
        src.save_params_to_files(prefix, 1)
        dense, sparse = prefix + "_dense_1.model", prefix + "0_sparse_1.model"
        fit = build(self.data)
        fit.load_dense_weights(dense)
        fit.load_sparse_weights([sparse])
        fit.freeze_dense()
        fit.fit(max_iter=3, display=0, eval_interval=0, snapshot=3, snapshot_prefix=os.path.join(self.tmp, "frzfit"))
        self.assertEqual(_util.read_bytes(os.path.join(self.tmp, "frzfit_dense_3.model")), _util.read_bytes(dense))
        low = build(self.data)
        low.load_dense_weights(dense)
        low.freeze_dense()
        low.freeze_embedding("sparse_embedding1")
        low.start_data_reading()
        low.train()
        low.save_params_to_files(os.path.join(self.tmp, "frzlow"), 1)
        self.assertEqual(_util.read_bytes(os.path.join(self.tmp, "frzlow_dense_1.model")), _util.read_bytes(dense))
        low.unfreeze_dense()
        low.train()
        low.save_params_to_files(os.path.join(self.tmp, "frzlow"), 2)
        self.assertNotEqual(_util.read_bytes(os.path.join(self.tmp, "frzlow_dense_2.model")), _util.read_bytes(dense))

    def test_construct_from_json(self):
        model = build(self.data)
        graph = os.path.join(self.tmp, "g.json")
        model.graph_to_json(graph)
        again = build(self.data)
        again.construct_from_json(graph_config_file=graph, include_dense_network=True)
        graph2 = os.path.join(self.tmp, "g2.json")
        again.graph_to_json(graph2)
        self.assertEqual(_util.read(graph), _util.read(graph2))
        # Without the dense network: the embeddings only, a new head on top.
        solver = hugectr.CreateSolver(batchsize=256, batchsize_eval=512, max_eval_batches=2, vvgpu=[[0]])
        reader = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm,
                                          source=[os.path.join(self.data, "file_list.txt")],
                                          eval_source=os.path.join(self.data, "file_list_test.txt"),
                                          check_type=hugectr.Check_t.Sum)
        head = hugectr.Model(solver, reader, hugectr.CreateOptimizer())
        head.construct_from_json(graph_config_file=graph, include_dense_network=False)
        head.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.Reshape, bottom_names=["sparse_embedding1"],
                                    top_names=["r"], leading_dim=48))
        head.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.InnerProduct, bottom_names=["r"], top_names=["fc"],
                                    num_output=1))
        head.add(hugectr.DenseLayer(layer_type=hugectr.Layer_t.BinaryCrossEntropyLoss, bottom_names=["fc", "label"],
                                    top_names=["loss"]))
        text = head.summary()
        self.assertIn("sparse_embedding1", text)
        self.assertNotIn("concat1", text)

    def test_errors(self):
        model = build(self.data)
        with self.assertRaises(ValueError):
            model.get_eval_metrics()
        with self.assertRaises(hugectr.CtrkitError) as cm:
            model.set_source("/nonexistent/file_list.txt", os.path.join(self.data, "file_list_test.txt"))
            model.start_data_reading()
            model.train()
        self.assertIn("/nonexistent/file_list.txt", str(cm.exception))
        with self.assertRaises(ValueError):
            model.freeze_embedding("nope")
        with self.assertRaises(hugectr.CtrkitError) as cm:
            build(self.data).reset_learning_rate_scheduler(base_lr=0.1, decay_power=0.5) or None
            m = build(self.data)
            m.start_data_reading()
            m.reset_learning_rate_scheduler(base_lr=0.1, decay_power=0.5)
        self.assertIn("decay_power", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
