"""The query encoder a pack carries (encoder/ + sha256 in the manifest), the query side
that loads it without the build's dependencies, and the one-line install messages."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from query_fixtures import build_pack, embedder  # noqa: F401 (fixture)

from packs import KnowledgePack
from packs import format as fmt
from packs.embedding import EmbeddingModelError
from packs.encoder import sha256_file
from packs.extras import BUILD_INSTALL, MCP_INSTALL, build_missing_message
from packs.integrity import checksums
from packs.manifest import read_manifest
from tasks.encoder_export import OPT_OUT_REASON, write_encoder
from tests.conftest import OFFLINE_MODEL

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Where do jobs go after they exhaust their retries?"
BUILD_SIDE = ("torch", "sentence_transformers", "huggingface_hub", "prefect", "transformers",
              "onnx", "polars", "pyarrow", "trafilatura")


def _with_encoder(root: Path, embedder, precision: str = "fp32", name: str = "kestrel") -> Path:
    """A Kestrel pack whose build carries the encoder tasks.encoder_export writes at publish."""
    pack = build_pack(root, embedder, name=name)
    build = pack / fmt.BUILDS_DIR / "b0001"
    manifest = read_manifest(build)
    manifest.encoder = write_encoder(build, OFFLINE_MODEL, precision)
    manifest.checksums = checksums(build)  # the publish step seals the encoder with the rest
    manifest.write(build)
    return pack


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, embedder) -> Path:
    return _with_encoder(tmp_path_factory.mktemp("shipped"), embedder)


def _child(code: str, *, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run `code` in a new interpreter of this venv; modules in `block` cannot be imported
    there (None in sys.modules), as on an install that lacks them."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in block)
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                               "TOKENIZERS_PARALLELISM": "false"})


def test_the_build_ships_the_export_and_tokenizer_with_their_sha256(shipped) -> None:
    build = shipped / fmt.BUILDS_DIR / "b0001"
    enc = read_manifest(build).encoder
    assert enc.present and (enc.runtime, enc.precision, enc.pooling) == ("onnxruntime", "fp32", "mean")
    assert enc.max_seq_length == 256
    assert set(enc.files) == {fmt.ENCODER_MODEL, fmt.ENCODER_TOKENIZER}
    for rel, digest in enc.files.items():
        assert sha256_file(build / rel) == digest.sha256
        assert (build / rel).stat().st_size == digest.bytes > 0


def test_the_shipped_encoder_gives_the_build_models_vectors(shipped, embedder) -> None:
    with KnowledgePack.open(shipped) as pack:
        assert pack.embedder.backend == "onnx"
        assert pack.embedder.load_from.startswith(str(shipped))  # not the model package
        got = pack.embed_query(QUESTION)
    assert np.abs(got - embedder.encode_query(QUESTION)).max() < 1e-5


def test_search_imports_nothing_from_the_build_side(shipped) -> None:
    code = (
        "from packs import KnowledgePack\n"
        f"with KnowledgePack.open({str(shipped)!r}) as p:\n"
        f"    r = p.search({QUESTION!r}); a = p.ask({QUESTION!r})\n"
        "    print(p.embedder.backend, r.sections[0].url, a['query_type'])\n"
        f"print(sorted(m for m in {BUILD_SIDE!r} if m in sys.modules))\n"
    )
    out = _child(code)
    assert out.returncode == 0, out.stderr
    first, loaded = out.stdout.strip().splitlines()
    assert first == "onnx https://docs.kestrel.test/queues/ retrieval_only"
    assert loaded == "[]"


def test_the_runtime_answers_with_the_build_side_blocked(shipped) -> None:
    """Torch, sentence-transformers and the hub cannot even be imported: search works."""
    code = (f"from packs import KnowledgePack\nwith KnowledgePack.open({str(shipped)!r}) as p:\n"
            f"    print(p.search({QUESTION!r}).sections[0].url)\n")
    out = _child(code, block=("torch", "sentence_transformers", "huggingface_hub", "transformers"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "https://docs.kestrel.test/queues/"


def test_a_damaged_encoder_is_refused(tmp_path, embedder) -> None:
    pack = _with_encoder(tmp_path, embedder)
    tok = pack / fmt.BUILDS_DIR / "b0001" / fmt.ENCODER_TOKENIZER
    data = tok.read_bytes()
    tok.unlink()  # a hard link into the model package: replace it, never edit in place
    tok.write_bytes(data.replace(b"[CLS]", b"[XLS]", 1))
    with KnowledgePack.open(pack) as p, pytest.raises(EmbeddingModelError,
                                                      match="does not match its sha256"):
        p.search(QUESTION)


def test_opting_out_records_why_and_queries_load_the_model(tmp_path, embedder) -> None:
    pack = _with_encoder(tmp_path, embedder, precision="none")
    build = pack / fmt.BUILDS_DIR / "b0001"
    enc = read_manifest(build).encoder
    assert not enc.present and enc.reason == OPT_OUT_REASON
    assert not (build / fmt.ENCODER_DIR).exists()
    with KnowledgePack.open(pack) as p:
        assert p.search(QUESTION).sections[0].url == "https://docs.kestrel.test/queues/"
        assert not p.embedder.load_from.startswith(str(pack))


def test_no_encoder_and_no_sentence_transformers_says_what_to_install(tmp_path, embedder) -> None:
    pack = _with_encoder(tmp_path, embedder, precision="none")
    code = (f"from packs import KnowledgePack\nwith KnowledgePack.open({str(pack)!r}) as p:\n"
            f"    p.search({QUESTION!r})\n")
    # No ONNX export in the (empty) cache and no sentence-transformers: the runtime install.
    env_cache = f"import os; os.environ['KPACK_CACHE_DIR'] = {str(tmp_path / 'cache')!r}\n"
    out = _child(env_cache + code, block=("sentence_transformers", "torch"))
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert "carries no query encoder (opted out in pack.toml" in last
    assert BUILD_INSTALL in last and "embedding_model=" in last


def test_a_model_that_cannot_be_found_names_the_fix(tmp_path, embedder) -> None:
    pack = _with_encoder(tmp_path, embedder, precision="none")
    build = pack / fmt.BUILDS_DIR / "b0001"
    raw = json.loads((build / fmt.MANIFEST_FILE).read_text())
    raw["embedding"]["model"] = "example-org/not-a-cached-model"
    (build / fmt.MANIFEST_FILE).write_text(json.dumps(raw))
    with KnowledgePack.open(pack) as p, pytest.raises(EmbeddingModelError) as err:
        p.search(QUESTION)
    message = str(err.value)
    assert "\n" not in message
    assert "'example-org/not-a-cached-model' cannot be loaded here" in message
    assert BUILD_INSTALL in message


def test_an_unknown_precision_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="use one of fp32, none"):
        write_encoder(tmp_path, OFFLINE_MODEL, "int8")


def test_build_and_mcp_on_a_runtime_install_say_what_to_install(monkeypatch, tmp_path) -> None:
    assert build_missing_message() is None  # this venv has the build extra
    monkeypatch.setitem(sys.modules, "prefect", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    msg = build_missing_message()
    assert msg == ("kpack build needs the build dependencies (prefect, torch not installed; "
                   f"this is the query runtime): {BUILD_INSTALL}")
    out = _child("from packs.cli import main\nsys.argv = ['kpack', 'build', 'sources/example']\n"
                 "main()", block=("prefect",))
    assert out.returncode == 1
    assert out.stderr.strip() == ("error: kpack build needs the build dependencies (prefect not "
                                  f"installed; this is the query runtime): {BUILD_INSTALL}")
    out = _child(f"from packs.cli import main\nsys.argv = ['kpack', 'mcp', {str(tmp_path)!r}]\n"
                 "main()", block=("mcp",))
    assert out.returncode == 1
    assert out.stderr.strip().endswith(MCP_INSTALL)


def test_export_failure_falls_back_to_sentence_transformers(tmp_path, monkeypatch) -> None:
    """The exporter raising (as torch.onnx does without the onnx package) is logged and the
    model runs on sentence-transformers instead of crashing."""
    from packs import embedding, onnx_backend

    def broken(folder, target):
        raise RuntimeError("Module onnx is not installed!")

    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(onnx_backend, "export", broken)
    folder = tmp_path / "model"
    shutil.copytree(embedding.resolve_model(OFFLINE_MODEL).load_from, folder)
    assert embedding.Embedder(str(folder)).backend == "torch"


def test_a_failing_export_ships_no_encoder_and_says_why(tmp_path, monkeypatch, embedder) -> None:
    from packs import onnx_backend

    def broken(folder, target):
        raise RuntimeError("Module onnx is not installed!")

    monkeypatch.setenv("KPACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(onnx_backend, "export", broken)
    info = write_encoder(tmp_path, OFFLINE_MODEL)
    assert not info.present and not (tmp_path / fmt.ENCODER_DIR).exists()
    assert info.reason == (f"the ONNX export of {OFFLINE_MODEL} failed (RuntimeError: Module "
                           "onnx is not installed!): the query side needs sentence-transformers")
