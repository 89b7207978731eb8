"""The benchmark book (benchmarks/book.py): one page of current tables from results files
and the ledger, blind figures pooled over every split ever run, misses included."""

from __future__ import annotations

import json

import pytest

from benchmarks import book, results_md
from benchmarks.targets import Figure, Target

ROOT = book.ROOT


def _results(folder, name: str, date: str, product: str, command: str = "answers.py") -> None:
    (folder / name).write_text(
        f"# Answers\n\n- Command: `python benchmarks/{command} --split dev`\n\n```\n"
        f"machine: vm x86_64, 2 cores, no GPU, Python 3.11.7; date {date} UTC\n\n"
        "kubernetes dev (10 questions), share whose answer contains every gold group:\n"
        "  5/10 questions, 1 s\n"
        "| run | gate on | words |\n|---|---|---|\n"
        "| baseline: first sentence | 0.200 [0.000, 0.500] | 18.0 |\n"
        f"| product: extractive answer | {product} | 99.0 |\n```\n", encoding="utf-8")


def _ledger(path) -> None:
    rows = [
        {"event": "freeze", "date": "2026-11-01T00:00:00+00:00", "target": "answers-k8s",
         "split": "a.jsonl:round=1", "questions": 10, "sha256": "x"},
        {"event": "run", "date": "2026-11-02T00:00:00+00:00", "target": "answers-k8s",
         "split": "a.jsonl:round=1", "questions": 10, "figure": 0.5},
        # a second look at the same split: reported, never pooled
        {"event": "run", "date": "2026-11-03T00:00:00+00:00", "target": "answers-k8s",
         "split": "a.jsonl:round=1", "questions": 10, "figure": 0.9, "blind": False},
        {"event": "run", "date": "2026-11-04T00:00:00+00:00", "target": "answers-k8s",
         "split": "a.jsonl:round=2", "questions": 30, "figure": 0.7},  # a miss stands
        {"event": "freeze", "date": "2026-11-05T00:00:00+00:00", "target": "answers-k8s",
         "split": "a.jsonl:round=3", "questions": 12, "sha256": "y"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


TARGETS = (
    Target("answers", "Offline answers", "contain the gold values",
           (Figure(("answers.md", "old_*.md"), caption="^kubernetes dev"),),
           "python benchmarks/answers.py --split dev", blind=("answers-k8s",),
           blind_command="python benchmarks/answers.py --split test"),
    Target("latency", "Latency", "fast", (Figure(("latency.md",), header="p50"),)),
)


def test_the_book_shows_the_newest_table_and_the_pooled_blind_figure(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _results(results, "old_answers.md", "2026-11-01 10:00", "0.800 [0.500, 1.000]")
    _results(results, "answers.md", "2026-11-02 10:00", "0.900 [0.700, 1.000]")
    _results(results, "old_answers_before.md", "2026-11-09 10:00", "0.100 [0.000, 0.300]")
    _results(results, "study.md", "2026-11-03 10:00", "0.300 [0.100, 0.500]", "study.py")
    (results / "history.md").write_text("# the old notebook\n" * 1000, encoding="utf-8")
    ledger_file = tmp_path / "ledger.jsonl"
    _ledger(ledger_file)
    out = tmp_path / "BENCHMARKS.md"

    n = book.write_book(results, ledger_file, out, TARGETS)
    text = out.read_text(encoding="utf-8")

    assert n == text.count("\n") <= book.MAX_LINES
    # newest by printed date; a baseline of the code before a change is never the figure
    assert "0.900 [0.700, 1.000]" in text and "0.800 [" not in text and "0.100 [" not in text
    assert "`results/answers.md`, 2026-11-02 10:00, vm x86_64" in text
    assert "python benchmarks/answers.py --split dev" in text
    assert "baseline: first sentence" in text  # the baseline row of the same run
    # pooled: first blind run of each split, question-weighted: (0.5*10 + 0.7*30) / 40
    lo, hi = book.wilson(0.65, 40)
    assert f"pooled 0.650 [{lo:.3f}, {hi:.3f}], 2 splits, 40 q" in text
    assert "1 later looks at a split already reported are not counted" in text
    assert "Frozen, not run yet: `a.jsonl:round=3`" in text
    # a target with no results file says so; files no target shows are listed
    assert "No results file yet for latency.md" in text
    assert "`study.md` (2026-11-03)" in text and "`old_answers.md`" in text
    assert "history.md" not in text.split("## Other results files")[1]


def test_a_target_without_a_blind_run_says_so_and_the_book_refuses_to_grow(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _results(results, "answers.md", "2026-11-02 10:00", "0.900 [0.700, 1.000]")
    ledger_file = tmp_path / "ledger.jsonl"
    ledger_file.write_text(json.dumps({
        "event": "freeze", "date": "2026-11-05T00:00:00+00:00", "target": "answers-k8s",
        "split": "a.jsonl:round=3", "questions": 12, "sha256": "y"}) + "\n")
    book.write_book(results, ledger_file, tmp_path / "B.md", TARGETS)
    assert "`answers-k8s`: no blind run yet." in (tmp_path / "B.md").read_text()

    many = tuple(Target(f"t{i}", f"Target {i}", "g", (Figure(("answers.md",)),))
                 for i in range(60))
    with pytest.raises(ValueError, match="over 400"):
        book.write_book(results, ledger_file, tmp_path / "C.md", many)
    assert not (tmp_path / "C.md").exists()


def test_results_md_reads_command_date_machine_and_captioned_tables(tmp_path):
    _results(tmp_path, "answers.md", "2026-11-02 10:00", "0.900 [0.700, 1.000]")
    res = results_md.load(tmp_path / "answers.md")
    assert res.command == "python benchmarks/answers.py --split dev"
    assert (res.date, res.machine) == ("2026-11-02 10:00", "vm x86_64, 2 cores, no GPU, "
                                                           "Python 3.11.7")
    [table] = res.tables
    assert table.caption.startswith("kubernetes dev (10 questions)")  # progress left out
    assert table.rows()[1] == ["product: extractive answer", "0.900 [0.700, 1.000]", "99.0"]
    # the JSON summary beside it reads back the same
    results_md.write_json(tmp_path / "answers.md")
    again = results_md.load(tmp_path / "answers.md")
    assert (again.command, again.date, again.tables) == (res.command, res.date, res.tables)


def test_the_committed_book_is_one_page_made_from_the_committed_results():
    """BENCHMARKS.md is what `make book` writes from benchmarks/results/ and the ledger:
    after adding results files or ledger runs, run `make book`."""
    committed = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert committed.count("\n") <= book.MAX_LINES
    fresh = book.render(book.load_results(book.RESULTS), book.ledger.entries())
    assert committed == fresh, "BENCHMARKS.md is stale: run `make book`"


def test_make_bench_never_runs_a_test_split():
    """The standing suite runs dev splits only; blind runs are their own commands."""
    for t in book.TARGETS:
        assert "--split test" not in t.command and "--record" not in t.command, t.id
        assert "--split both" not in t.command, t.id
