"""Acceptance: WDL, DCN and DLRM scripts in HugeCTR's documented style run
with only the import changed; their graph JSON is what ctrkit's writer
writes and loads in `ctrkit summary`; InferenceModel agrees with
`ctrkit predict` and `ctrkit evaluate`."""

import json
import os
import shutil
import struct
import tempfile
import unittest

from tests import _util
import ctrkit.hugectr as hugectr


class ScriptTest(unittest.TestCase):
    dirs = {}

    @classmethod
    def setUpClass(cls):
        _util.need_binary()

    @classmethod
    def tearDownClass(cls):
        for d in cls.dirs.values():
            shutil.rmtree(d, ignore_errors=True)

    def script(self, name):
        if name not in self.dirs:
            d = tempfile.mkdtemp(prefix="ctrkit-%s-" % name)
            code, out = _util.run_script(name, d)
            self.dirs[name] = d
            self.__class__.outputs = getattr(self.__class__, "outputs", {})
            self.__class__.outputs[name] = (code, out)
        code, out = self.__class__.outputs[name]
        self.assertEqual(code, 0, out)
        return self.dirs[name], out

    def check_script(self, name, embeddings):
        d, out = self.script(name)
        for want in ["Iter: 8 Time(8 iters)", "Iter: 24 ", "Evaluation, AUC: ", "dense parameters",
                     "Save the model graph to %s.json successfully" % name]:
            self.assertIn(want, out)
        graph = os.path.join(d, name + ".json")
        # ctrkit's Go writer writes the same bytes from what it reads.
        summary = _util.ctrkit("summary", "--config", graph, "--graph-out", os.path.join(d, "go.json"))
        self.assertIn("BinaryCrossEntropyLoss", summary)
        with open(graph, "rb") as a, open(os.path.join(d, "go.json"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        g = json.loads(_util.read(graph))
        self.assertEqual([l["type"] for l in g["layers"][:1 + len(embeddings)]][1:], embeddings)
        self.assertTrue(os.path.exists(os.path.join(d, "%s_dense_24.model" % name)))
        for i in range(len(embeddings)):
            self.assertTrue(os.path.exists(os.path.join(d, "%s%d_sparse_24.model" % (name, i))))
        return d, g

    def check_inference(self, name, n_emb, source, fmt, slot_sizes=None):
        d, _ = self.script(name)
        graph = os.path.join(d, name + ".json")
        params = hugectr.inference.InferenceParams(
            model_name=name, max_batchsize=512, hit_rate_threshold=1.0,
            dense_model_file=os.path.join(d, "%s_dense_24.model" % name),
            sparse_model_files=[os.path.join(d, "%s%d_sparse_24.model" % (name, i)) for i in range(n_emb)],
            device_id=0, use_gpu_embedding_cache=False, cache_size_percentage=1.0, i64_input_key=False)
        m = hugectr.inference.InferenceModel(graph, params)
        chk = hugectr.Check_t.Sum if fmt is hugectr.DataReaderType_t.Norm else hugectr.Check_t.Non
        pred = m.predict(2, os.path.join(d, source), fmt, chk, slot_sizes or [])
        self.assertEqual(len(pred), 1024)
        self.assertEqual(len(pred[0]), 1)
        out = os.path.join(d, "pred.txt")
        args = ["predict", "--config", graph, "--load-prefix", os.path.join(d, name), "--load-iter", 24,
                "--eval-source", os.path.join(d, source), "--format", fmt.value.lower(), "--batchsize", 512,
                "-o", out, "--device", os.environ["CTRKIT_DEVICE"]]
        if slot_sizes:
            args += ["--data-slot-size-array", ",".join(map(str, slot_sizes))]
        if chk is hugectr.Check_t.Non:
            args += ["--check-type", "none"]
        _util.ctrkit(*args)
        # ctrkit predict covers all the eval data (2048 samples).
        want = _util.read_rows(out)[:1024]
        # Both float32: numpy's float32 values (when numpy is there) and the
        # file's 9 significant digits name the same float32 numbers.
        f32 = lambda rows: [[struct.unpack("f", struct.pack("f", float(x)))[0] for x in r] for r in rows]
        self.assertEqual(f32(pred), f32(want))
        auc = m.evaluate(4, os.path.join(d, source), fmt, chk, slot_sizes or [])
        ev = json.loads(_util.ctrkit(*(["evaluate", "--json"] + [a for a in args[1:] if a not in ("-o", out)])))
        self.assertEqual(auc, ev["auc"])
        self.assertNotEqual(m.evaluate(1, os.path.join(d, source), fmt, chk, slot_sizes or []), auc)
        # More batches than samples: HugeCTR loops over the data.
        looped = m.predict(5, os.path.join(d, source), fmt, chk, slot_sizes or [])
        self.assertEqual(len(looped), 2560)
        self.assertEqual([list(map(float, r)) for r in looped[2048:]], [list(map(float, r)) for r in looped[:512]])

    def test_wdl(self):
        self.check_script("wdl", ["DistributedSlotSparseEmbeddingHash"] * 2)
        self.check_inference("wdl", 2, "wdl_data/file_list_test.txt", hugectr.DataReaderType_t.Norm)

    def test_dcn(self):
        d, g = self.check_script("dcn", ["DistributedSlotSparseEmbeddingHash"])
        # HugeCTR's graph analysis: concat1 feeds MultiCross and fc1.
        sl = [l for l in g["layers"] if l["type"] == "Slice"]
        self.assertEqual(len(sl), 1)
        self.assertEqual(sl[0]["top"], ["concat1_slice0", "concat1_slice1"])
        self.assertEqual(sl[0]["ranges"], [[0, 221], [0, 221]])
        mc = [l for l in g["layers"] if l["type"] == "MultiCross"][0]
        self.assertEqual(mc["bottom"], "concat1_slice0")

    def test_dlrm(self):
        self.check_script("dlrm", ["LocalizedSlotSparseEmbeddingOneHot"])
        self.check_inference("dlrm", 1, "dlrm_data/test_data.bin", hugectr.DataReaderType_t.Raw,
                             [50, 30, 80, 20, 60, 40, 10, 70])

    def test_dlrm_kaggle(self):
        # DataReaderSparseParam("data1", 2, False, 6) over one-hot Raw data,
        # as HugeCTR's DLRM samples declare it (ctrkit refused it).
        d, g = self.check_script("dlrm_kaggle", ["LocalizedSlotSparseEmbeddingOneHot"])
        sp = g["layers"][0]["sparse"][0]
        self.assertEqual((sp["nnz_per_slot"], sp["is_fixed_length"]), ([2] * 6, False))
        self.check_inference("dlrm_kaggle", 1, "kaggle/test_data.bin", hugectr.DataReaderType_t.Raw,
                             [40, 25, 60, 15, 35, 50])

    def test_criteo_multi_slots(self):
        # Multi-hot Norm slots, no dense features, the mean combiner.
        d, g = self.check_script("criteo_multi_slots", ["DistributedSlotSparseEmbeddingHash"])
        data = g["layers"][0]
        self.assertEqual(data["dense"]["dense_dim"], 0)
        self.assertEqual((data["sparse"][0]["nnz_per_slot"], data["sparse"][0]["is_fixed_length"]), ([5] * 10, False))
        self.assertEqual(g["layers"][1]["sparse_embedding_hparam"]["combiner"], "mean")
        # vvgpu [[0, 1]]: the embedding has two GPUs' capacity.
        one = (1 << 20) // (3 * 4 * 8)
        self.assertEqual(g["layers"][1]["sparse_embedding_hparam"]["max_vocabulary_size_global"], 2 * one)
        self.check_inference("criteo_multi_slots", 1, "criteo_data/file_list_test.txt",
                             hugectr.DataReaderType_t.Norm)

    def test_din(self):
        # Attention layers whose widths only ctrkit follows: the automatic
        # Slice layers come from `ctrkit summary`'s shapes, and the graph is
        # the one ctrkit's writer writes (check_script).
        d, g = self.check_script("din", ["DistributedSlotSparseEmbeddingHash"] * 3)
        sl = {l["bottom"]: l for l in g["layers"] if l["type"] == "Slice"}
        self.assertEqual(sorted(sl), ["item", "item_his_em", "scale_item"])
        self.assertEqual(sl["item_his_em"]["ranges"], [[0, 16]] * 5)
        self.assertEqual(sl["item"]["top"], ["item_slice0", "item_slice1"])

    def test_inference_params(self):
        # Every InferenceParams argument is honoured or refused by name.
        d, _ = self.script("dlrm_kaggle")
        graph = os.path.join(d, "dlrm_kaggle.json")
        inf = hugectr.inference
        base = dict(model_name="dlrm_kaggle", max_batchsize=512, hit_rate_threshold=1.0,
                    dense_model_file=os.path.join(d, "dlrm_kaggle_dense_24.model"),
                    sparse_model_files=[os.path.join(d, "dlrm_kaggle0_sparse_24.model")],
                    use_gpu_embedding_cache=False, cache_size_percentage=1.0, i64_input_key=False)
        src = os.path.join(d, "kaggle/test_data.bin")
        raw, non = hugectr.DataReaderType_t.Raw, hugectr.Check_t.Non
        slots = [40, 25, 60, 15, 35, 50]

        def predict(**kw):
            return [list(map(float, r)) for r in inf.InferenceModel(graph, inf.InferenceParams(
                **dict(base, **kw))).predict(1, src, raw, non, slots)]

        want = predict()
        # HugeCTR's cache, parameter-server and scheduling settings change its
        # speed, not its answers: the same predictions (positionally too).
        self.assertEqual(predict(hit_rate_threshold=0.5, use_gpu_embedding_cache=True, cache_size_percentage=0.1,
                                 use_cuda_graph=False, thread_pool_size=4, embedding_cache_type="static",
                                 deployed_devices=[0], label_dim=1, slot_num=6, embedding_vecsize_per_table=[8],
                                 embedding_table_names=["t"], network_file=graph), want)
        p = inf.InferenceParams("m", 512, 1.0, base["dense_model_file"], base["sparse_model_files"], 0, False, 1.0,
                                False, False, 1.0, False, False)
        self.assertEqual((p.use_algorithm_search, p.use_cuda_graph), (False, False))
        for kw, err, want_msg in [
                (dict(volatile_db=object()), NotImplementedError, "volatile_db"),
                (dict(update_source=object()), NotImplementedError, "update_source"),
                (dict(fp8_quant=True), NotImplementedError, "fp8_quant"),
                (dict(default_value_for_each_table=[0.5]), NotImplementedError, "default_value_for_each_table"),
                (dict(device_id=1), ValueError, "deployed_devices=[1]"),
                (dict(deployed_devices=[0, 1], max_batchsize=511), ValueError, "divisible"),
                (dict(deployed_devices=[]), ValueError, "cannot be empty"),
                (dict(cache_size_percentage=1.5), ValueError, "cache_size_percentage"),
                (dict(bogus=1), TypeError, "bogus")]:
            with self.assertRaises(err) as cm:
                inf.InferenceParams(**dict(base, **kw))
            self.assertIn(want_msg, str(cm.exception))
        for kw, want_msg in [(dict(slot_num=3), "has 6 slots"), (dict(label_dim=0), "label_dim"),
                             (dict(embedding_vecsize_per_table=[4]), "whose vectors have 8"),
                             (dict(embedding_table_names=["a", "b"]), "2 entries for the 1 embedding"),
                             (dict(network_file=base["dense_model_file"]), "network_file")]:
            with self.assertRaises(ValueError) as cm:
                inf.InferenceModel(graph, inf.InferenceParams(**dict(base, **kw)))
            self.assertIn(want_msg, str(cm.exception))
        with self.assertRaises(FileNotFoundError) as cm:
            inf.InferenceModel(graph, inf.InferenceParams(**dict(base, non_trainable_params_file="nope.json")))
        self.assertIn("non_trainable_params_file", str(cm.exception))
        m = inf.InferenceModel(graph, inf.InferenceParams(**base))
        with self.assertRaises(NotImplementedError):
            m.predict(1, src, raw, non, slots, reading_file_sequentially=False)
        self.assertEqual([list(map(float, r)) for r in m.predict(1, src, raw, non, slots, hugectr.data.DataSourceParams(),
                                                                 True)], want)


if __name__ == "__main__":
    unittest.main()
