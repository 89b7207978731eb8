from pathlib import Path

import pytest

from tasks.sources import PackConfig, SourceError, load_config, load_source, parse_urls


def test_parse_urls_comments_blank_lines_and_duplicates(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# hi")
    origin = tmp_path / "urls.txt"
    text = (
        "# a comment\n"
        "\n"
        "https://example.org/a   # trailing comment\n"
        "https://example.org/a\n"
        "page.md\n"
        "https://example.org/b#frag\n"
    )
    entries = parse_urls(text, origin)
    assert [e.url for e in entries] == [
        "https://example.org/a",
        (tmp_path / "page.md").resolve().as_uri(),
        "https://example.org/b#frag",
    ]
    assert [e.line for e in entries] == [3, 5, 6]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ftp://example.org/x", "unsupported scheme 'ftp'"),
        ("missing.md", "does not exist"),
        ("https://", "has no host"),
        ("two words", "one URL or path per line"),
        ("file://relative/path", "absolute path"),
        ("https://example.org/a\x00b", "control character '\\x00'"),
        ("https://example.org/\u200bx", "control character '\\u200b'"),
        ("http://[::1/x", "is not a valid URL"),
        ("https://example.org:99999/", "is not a valid URL"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    origin = tmp_path / "urls.txt"
    with pytest.raises(SourceError) as err:
        parse_urls(f"# header\n{line}\n", origin)
    assert f"{origin}:2" in str(err.value)
    assert message in str(err.value)


def test_folder_entry_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(SourceError, match="is a folder"):
        parse_urls("sub\n", tmp_path / "urls.txt")


def test_load_source_defaults_and_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="unknown source"):
        load_source(tmp_path / "nope")
    src = tmp_path / "docs"
    src.mkdir()
    with pytest.raises(SourceError, match="no urls.txt"):
        load_source(src)
    (src / "urls.txt").write_text("# nothing yet\n")
    with pytest.raises(SourceError, match="lists no URLs"):
        load_source(src)
    (src / "urls.txt").write_text("https://example.org/\n")
    source = load_source(src)
    assert source.name == "docs"
    assert source.config == PackConfig()


def test_pack_toml_is_typed_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "pack.toml"
    path.write_text('name = "k8s"\nextractor = "offline"\nallowed_hosts = ["kubernetes.io"]\n')
    cfg = load_config(path)
    assert (cfg.name, cfg.extractor, cfg.allowed_hosts) == ("k8s", "offline", ["kubernetes.io"])
    path.write_text('extractor = "gpt"\nfetch_concurrency = 0\ncolour = "red"\n')
    with pytest.raises(SourceError) as err:
        load_config(path)
    text = str(err.value)
    assert "extractor" in text and "fetch_concurrency" in text and "colour" in text
    path.write_text('schedule = "every day"\n')
    with pytest.raises(SourceError, match="cron"):
        load_config(path)
    path.write_text("name = [unclosed\n")
    with pytest.raises(SourceError, match="not valid TOML"):
        load_config(path)
    path.write_text("chunk_words = 8\nchunk_overlap = 0.9\n")
    with pytest.raises(SourceError) as err:
        load_config(path)
    assert "chunk_words" in str(err.value) and "chunk_overlap" in str(err.value)


def test_chunking_follows_pack_toml_within_the_model_window(tmp_path: Path) -> None:
    from flows.plan import chunking
    from packs.embedding import Embedder

    embedder = Embedder("sentence-transformers/all-MiniLM-L6-v2")  # 256 tokens ≈ 140 words
    src = tmp_path / "docs"
    src.mkdir()
    (src / "urls.txt").write_text("https://example.org/a\n")
    assert chunking(load_source(src), embedder) == (140, 21)
    (src / "pack.toml").write_text("chunk_words = 64\nchunk_overlap = 0.5\n")
    assert chunking(load_source(src), embedder) == (64, 32)
    (src / "pack.toml").write_text("chunk_words = 400\n")
    with pytest.raises(SourceError, match=r"chunk_words = 400 is more than .* use at most 140"):
        chunking(load_source(src), embedder)


def test_urls_txt_that_is_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "urls.txt").write_bytes(b"https://example.org/a\nhttps://example.org/\xff\n")
    with pytest.raises(SourceError, match=r"urls.txt:2: not UTF-8 text"):
        load_source(tmp_path)


@pytest.mark.parametrize(("toml", "where", "message"), [
    ('name = "x"\nallow_private_hosts = "yes"\n', 2, "'yes' is not true or false"),
    ('keep_builds = "3"\n', 1, "'3' is not a whole number"),
    ('\n\nchunk_overlap = nan\n', 3, "chunk_overlap"),
    ('guard_max_failed_share = 1.5\n', 1, "less than or equal to 1"),
])
def test_pack_toml_values_are_strict_and_name_their_line(tmp_path: Path, toml: str, where: int,
                                                         message: str) -> None:
    path = tmp_path / "pack.toml"
    path.write_text(toml)
    with pytest.raises(SourceError) as err:
        load_config(path)
    assert f"{path}:{where}:" in str(err.value) and message in str(err.value)
