"""HugeCTR's names and defaults, and the errors users see."""

import os
import subprocess
import sys
import tempfile
import unittest

from tests import _util
import ctrkit
import ctrkit.hugectr as hugectr
from ctrkit import _proc


class NamesTest(unittest.TestCase):
    def test_names(self):
        for n in ["CreateSolver", "CreateETC", "AsyncParam", "HybridEmbeddingParam", "DataReaderParams",
                  "DataReaderSparseParam", "CreateOptimizer", "Input", "SparseEmbedding", "DenseLayer",
                  "GroupDenseLayer", "Model", "DataReaderType_t", "Check_t", "Optimizer_t", "Update_t",
                  "Embedding_t", "Layer_t", "Initializer_t", "MetricsType", "LrPolicy_t", "Alignment_t",
                  "DeviceLayout", "Activation_t", "FcPosition_t", "Regularizer_t", "Distribution_t", "PowerLaw_t",
                  "CommunicationType", "HybridEmbeddingType", "GroupLayer_t"]:
            self.assertTrue(hasattr(hugectr, n), n)
        self.assertTrue(hasattr(hugectr.inference, "InferenceParams"))
        self.assertTrue(hasattr(hugectr.tools, "DataGenerator"))
        for m in ["add", "compile", "summary", "fit", "graph_to_json", "construct_from_json", "load_dense_weights",
                  "load_dense_optimizer_states", "load_sparse_weights", "load_sparse_optimizer_states",
                  "freeze_dense", "freeze_embedding", "unfreeze_dense", "unfreeze_embedding",
                  "reset_learning_rate_scheduler", "set_source", "save_params_to_files", "export_predictions",
                  "start_data_reading", "set_learning_rate", "train", "get_current_loss", "eval",
                  "get_eval_metrics", "get_learning_rate_scheduler", "get_data_reader_train",
                  "get_data_reader_eval"]:
            self.assertTrue(callable(getattr(hugectr.Model, m)), m)

    def test_defaults(self):
        s = hugectr.CreateSolver()
        self.assertEqual((s.batchsize, s.batchsize_eval, s.max_eval_batches, s.lr, s.warmup_steps, s.decay_steps,
                          s.decay_power, s.vvgpu, s.repeat_dataset, s.seed),
                         (2048, 2048, 100, 0.001, 1, 1, 2.0, [[0]], True, 0))
        self.assertEqual(s.metrics_spec, {hugectr.MetricsType.AUC: 1.0})
        o = hugectr.CreateOptimizer()
        self.assertEqual((o.optimizer, o.update_type), (hugectr.Optimizer_t.Adam, hugectr.Update_t.Global))
        self.assertEqual(o._json(), {"type": "Adam", "update_type": "Global", "adam_hparam": {
            "beta1": hugectr.F32(0.9), "beta2": hugectr.F32(0.999), "epsilon": hugectr.F32(1e-7)}})
        r = hugectr.DataReaderParams(data_reader_type=hugectr.DataReaderType_t.Norm, source="a.txt",
                                     eval_source="b.txt", check_type=hugectr.Check_t.Sum)
        self.assertEqual((r.source, r.num_workers, r.cache_eval_data), (["a.txt"], 12, 0))
        d = hugectr.DenseLayer(layer_type=hugectr.Layer_t.Dropout, bottom_names=["x"], top_names=["y"])
        self.assertEqual(d._json({}), {"type": "Dropout", "bottom": "x", "top": "y", "rate": hugectr.F32(0.5)})
        bn = hugectr.DenseLayer(hugectr.Layer_t.BatchNorm, ["x"], ["y"])
        self.assertEqual(bn._json({})["bn_param"], {"factor": 1.0, "eps": hugectr.F32(1e-5)})
        loss = hugectr.DenseLayer(hugectr.Layer_t.BinaryCrossEntropyLoss, ["p", "label"], ["loss"],
                                  use_regularizer=True, regularizer_type=hugectr.Regularizer_t.L2, **{"lambda": 0.1})
        self.assertEqual(loss._json({})["regularizer"], "L2")
        self.assertEqual(loss._json({})["lambda"], hugectr.F32(0.1))
        fc = hugectr.DenseLayer(hugectr.Layer_t.InnerProduct, ["x"], ["y"], num_output=4,
                                weight_init_type=hugectr.Initializer_t.XavierUniform)
        self.assertEqual(fc._json({})["fc_param"], {"num_output": 4, "weight_init": "XavierUniform"})

    def test_group_dense_layer(self):
        g = hugectr.GroupDenseLayer(hugectr.GroupLayer_t.GroupFusedInnerProduct, ["x"], ["a", "b", "c"], [8, 4, 1],
                                    last_act_type=hugectr.Activation_t.Non)
        js = [l._json({}) for l in g._layers()]
        self.assertEqual([(j["position"], j["activation"], j["fc_param"]["num_output"]) for j in js],
                         [("Head", "Relu", 8), ("Body", "Relu", 4), ("Tail", "None", 1)])
        self.assertEqual(js[0]["top"], ["a", "a_mask", "a_dRelu", "a_db"])
        self.assertEqual(js[2]["bottom"], ["b", "b_mask", "b_dRelu", "b_db"])
        self.assertEqual(js[2]["top"], "c")
        m = hugectr.Model(hugectr.CreateSolver(), hugectr.DataReaderParams(
            data_reader_type=hugectr.DataReaderType_t.Norm, source="a", eval_source="b",
            check_type=hugectr.Check_t.Sum), hugectr.CreateOptimizer())
        with self.assertRaises(ValueError) as cm:
            m.add(g)
        self.assertIn("use_mixed_precision", str(cm.exception))

    def test_refusals(self):
        with self.assertRaises(NotImplementedError) as cm:
            hugectr.CreateETC(ps_types=[hugectr.TrainPSType_t.Staged], sparse_models=["x"])
        self.assertIn("load_sparse_weights", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            hugectr.DataReaderParams(data_reader_type="Norm", source="a", eval_source="b",
                                     check_type=hugectr.Check_t.Sum)
        self.assertIn("hugectr.DataReaderType_t", str(cm.exception))
        with self.assertRaises(ValueError):
            hugectr.DataReaderSparseParam("d", [1, 2], False, 3)
        with self.assertRaises(ValueError):
            hugectr.CreateSolver(metrics_spec={hugectr.MetricsType.NDCG: 1.0})
        with self.assertRaises(TypeError):
            hugectr.DenseLayer(hugectr.Layer_t.ReLU, ["x"], ["y"], bogus=1)

    def test_hugectr_v23_09_surface(self):
        # Names HugeCTR's scripts use that ctrkit lacked (docs/PYTHON_COVERAGE.md).
        import ctrkit.hugectr.data as data
        p = data.DataSourceParams(source=hugectr.FileSystemType_t.Local, server="localhost", port=9000)
        self.assertEqual((p.source, p.server, p.port), (hugectr.FileSystemType_t.Local, "localhost", 9000))
        with self.assertRaises(NotImplementedError) as cm:
            data.DataSourceParams(source=hugectr.FileSystemType_t.S3, server="us-east-1", port=9000)
        self.assertIn("local files only", str(cm.exception))
        s = hugectr.CreateSolver(drop_incomplete_batch=False)
        self.assertFalse(s.drop_incomplete_batch)
        self.assertIs(hugectr.DataReader32, hugectr.DataReader64)
        with self.assertRaises(NotImplementedError):
            hugectr.EmbeddingTrainingCache()
        for m in ["get_incremental_model", "dump_incremental_model_2kafka", "get_embedding_training_cache",
                  "embedding_dump", "embedding_load"]:
            self.assertTrue(callable(getattr(hugectr.Model, m)), m)
        model = hugectr.Model(hugectr.CreateSolver(), hugectr.DataReaderParams(
            hugectr.DataReaderType_t.Norm, ["a"], eval_source="b", check_type=hugectr.Check_t.Sum),
            hugectr.CreateOptimizer())
        for call, want in [(lambda: model.get_incremental_model(), "save_params_to_files"),
                           (lambda: model.embedding_dump("p"), "EmbeddingCollection"),
                           (lambda: model.get_embedding_training_cache(), "Embedding Training Cache")]:
            with self.assertRaises(NotImplementedError) as cm:
                call()
            self.assertIn(want, str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            model.load_sparse_weights()
        self.assertIn("sparse_embedding_files_map", str(cm.exception))
        with self.assertRaises(ValueError) as cm:  # the map form reaches the name check
            model.load_sparse_weights(sparse_embedding_files_map={"nope": "f"})
        self.assertIn("no embedding 'nope'", str(cm.exception))


class CudaGraphTest(unittest.TestCase):
    def test_use_cuda_graph_goes_to_the_config(self):
        # CreateSolver(use_cuda_graph=...) is the config's solver.cuda_graph
        # (HugeCTR's default true): ctrkit train runs each step as a CUDA
        # graph on the GPU unless it is false.
        for on in (True, False):
            m = hugectr.Model(hugectr.CreateSolver(use_cuda_graph=on), hugectr.DataReaderParams(
                hugectr.DataReaderType_t.Norm, ["a"], eval_source="b", check_type=hugectr.Check_t.Sum),
                hugectr.CreateOptimizer())
            m.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=1, dense_name="dense",
                                data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("d", 1, True, 1)]))
            self.assertIs(m._config()["solver"]["cuda_graph"], on)


class GpusFlagTest(unittest.TestCase):
    def test_vvgpu_goes_to_the_config(self):
        # vvgpu is the config's solver.gpu, as in HugeCTR's JSON: ctrkit
        # train trains on those GPUs when the machine has them and on one
        # device with their capacity when not (the same as a JSON config);
        # fit never passes --gpus, which would refuse GPUs the machine
        # lacks (a vvgpu=[[0,1]] script failed on a 1-GPU machine).
        def model(vvgpu):
            m = hugectr.Model(hugectr.CreateSolver(vvgpu=vvgpu), hugectr.DataReaderParams(
                hugectr.DataReaderType_t.Norm, ["a"], eval_source="b", check_type=hugectr.Check_t.Sum),
                hugectr.CreateOptimizer())
            m.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=1, dense_name="dense",
                                data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("d", 1, True, 1)]))
            return m
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "ctrkit")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho '   --gpus value   GPU ordinals'\n")
            os.chmod(fake, 0o755)
            old = os.environ.get("CTRKIT_BIN")
            os.environ["CTRKIT_BIN"] = fake
            try:
                for vv in ([[0, 1]], [[0]], [[0, 1], [0, 1]]):
                    flags = model(vv)._train_flags()
                    self.assertNotIn("--gpus", flags, vv)
                    self.assertNotIn("--gpus", model(vv)._train_flags(session=True), vv)
                    self.assertEqual(model(vv)._config()["solver"]["gpu"], vv)
                self.assertIn("--drop-incomplete-batch=true", flags)
            finally:
                if old is None:
                    del os.environ["CTRKIT_BIN"]
                else:
                    os.environ["CTRKIT_BIN"] = old


class PrecisionTest(unittest.TestCase):
    def _model(self, **kw):
        m = hugectr.Model(hugectr.CreateSolver(**kw), hugectr.DataReaderParams(
            hugectr.DataReaderType_t.Norm, ["a"], eval_source="b", check_type=hugectr.Check_t.Sum),
            hugectr.CreateOptimizer())
        m.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=1, dense_name="dense",
                            data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("d", 1, True, 1)]))
        return m

    def test_precision(self):
        # use_mixed_precision is fp16: the config's mixed_precision scaler.
        m = self._model(use_mixed_precision=True, scaler=1024)
        self.assertEqual(m._config()["solver"]["mixed_precision"], 1024.0)
        self.assertNotIn("--precision", m._train_flags())
        # ctrkit_precision="fp16" is the same; "tf32" is enable_tf32_compute.
        self.assertEqual(self._model(ctrkit_precision="fp16", scaler=512)._config()["solver"]["mixed_precision"], 512.0)
        self.assertTrue(self._model(ctrkit_precision="tf32")._config()["solver"]["enable_tf32_compute"])
        # bf16 has no JSON key: the flag carries it, with an explicit scaler.
        b = self._model(ctrkit_precision="bf16")
        self.assertNotIn("mixed_precision", b._config()["solver"])
        f = b._train_flags()
        self.assertEqual(f[f.index("--precision") + 1], "bf16")
        self.assertNotIn("--loss-scale", f)
        f = self._model(ctrkit_precision="bf16", scaler=256)._train_flags()
        self.assertEqual(f[f.index("--loss-scale") + 1], "256.0")
        with self.assertRaises(ValueError) as cm:
            hugectr.CreateSolver(ctrkit_precision="bf16", use_mixed_precision=True)
        self.assertIn("disagree", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            hugectr.CreateSolver(ctrkit_precision="half")
        self.assertIn("'fp32', 'tf32', 'fp16' or 'bf16'", str(cm.exception))


class AlgorithmSearchTest(unittest.TestCase):
    def test_use_algorithm_search_goes_to_the_config(self):
        # CreateSolver(use_algorithm_search=...) is the config's
        # solver.algorithm_search (HugeCTR's default true), which ctrkit's
        # GPU backend honours.
        for kw, want in (({}, True), ({"use_algorithm_search": False}, False), ({"use_algorithm_search": True}, True)):
            m = hugectr.Model(hugectr.CreateSolver(**kw), hugectr.DataReaderParams(
                hugectr.DataReaderType_t.Norm, ["a"], eval_source="b", check_type=hugectr.Check_t.Sum),
                hugectr.CreateOptimizer())
            m.add(hugectr.Input(label_dim=1, label_name="label", dense_dim=1, dense_name="dense",
                                data_reader_sparse_param_array=[hugectr.DataReaderSparseParam("d", 1, True, 1)]))
            self.assertIs(m._config()["solver"]["algorithm_search"], want, kw)


class HugeCTRScriptsTest(unittest.TestCase):
    """tests/hugectr_scripts.py, the runner of HugeCTR's own scripts."""

    def test_runner(self):
        _util.need_binary()
        from tests import hugectr_scripts
        r = hugectr_scripts.run_one(os.path.join(_util.SCRIPTS, "dlrm_kaggle.py"))
        self.assertEqual(r["status"], "ok", r)
        self.assertIn("fit", r["calls"])
        self.assertIn("generate", r["calls"])
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.py")
            with open(bad, "w") as f:
                f.write("import hugectr\nfrom mpi4py import MPI\n"
                        "solver = hugectr.CreateSolver(vvgpu=[[0]], bogus_argument=1)\n")
            r = hugectr_scripts.run_one(bad)
        self.assertEqual(r["status"], "error")
        self.assertIn("bogus_argument", r["error"])
        self.assertIn("line 3", r["error"])


class BinaryTest(unittest.TestCase):
    def test_missing_binary(self):
        env = dict(os.environ)
        env.pop("CTRKIT_BIN", None)
        env["PATH"] = tempfile.mkdtemp()
        code = ("import sys; sys.path.insert(0, %r)\nfrom ctrkit import _proc\n"
                "try:\n    _proc.binary()\nexcept _proc.CtrkitError as e:\n    print(e)\n") % _util.PYROOT
        out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                             universal_newlines=True).stdout
        self.assertIn("go install ./cmd/ctrkit", out)
        env["CTRKIT_BIN"] = "/nonexistent/ctrkit"
        out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                             universal_newlines=True).stdout
        self.assertIn("CTRKIT_BIN=/nonexistent/ctrkit", out)

    def test_ctrkit_error_message(self):
        _util.need_binary()
        with self.assertRaises(ctrkit.CtrkitError) as cm:
            _proc.run(["summary", "--config", "/nonexistent/model.json"])
        self.assertIn("/nonexistent/model.json", str(cm.exception))
        self.assertFalse(str(cm.exception).startswith("ctrkit:"))
        s = _proc.Session()
        with self.assertRaises(ctrkit.CtrkitError) as cm:
            s.request("train")
        self.assertIn("send load first", str(cm.exception))
        self.assertTrue(s.request("ping")["ok"])
        s.close()


if __name__ == "__main__":
    unittest.main()
