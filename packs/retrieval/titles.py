"""Title match: a question that names a page's title finds that page.

Asked "StatefulSets" or "What is Pod Security Admission?", a reader wants the page of that
title, but the vectors and BM25 rank sections, and a page's title is one line of each of
its sections: on the Kubernetes docs, 116 of 401 pages asked by their title alone were not
the first result (sections named "Use kubectl to scale StatefulSets" or "Pods with multiple
containers" won). So the titles form a third ranking for the fusion.

A title *matches* when its words (lower-cased, stemmed: `packs.text.gate_terms`) occur in the
question as one run, and its content words (not stop words) make up at least
MIN_SHARE of the question's content words: "Nodes" matches "nodes" and "What are nodes?",
not "How do I drain a node?" (half the question is "drain"). A title that more than
MAX_SHARED pages carry ("Overview", "Getting started") names no page and never matches.
Longer titles come first: "Configure Liveness, Readiness and Startup Probes" before
"Liveness, Readiness, and Startup Probes" when the question holds both. Stems join titles
that differ in a word's form ("Assign Pods to Nodes" and "Assigning Pods to Nodes" are two
pages of the Kubernetes docs): of the pages one run of stems names, those whose title the
question writes word for word are kept when there are any, so "Assign Pods to Nodes" names
one page, and "How do I assign a pod to a node?" both. A title of two or three words is
also matched written as one name: "Persistent Volumes" by "What is a PersistentVolume?".
"""

from __future__ import annotations

from collections.abc import Iterable

from packs.text import content_terms as words_in_order
from packs.text import gate_terms as terms
from packs.text import tokens

MIN_SHARE = 0.6
# The title ranking's weight in RRF: a named page counts like a first place in both the
# vector and the BM25 ranking, so it comes first unless another section tops both.
WEIGHT = 2.0
MAX_SHARED = 3
# At most this many named pages join the ranking (longest titles first).
MAX_MATCHES = 3


def _joined(title: str) -> tuple[str, ...] | None:
    """The terms of a title of two or three content words written as one name
    ("Persistent Volumes" → the term of "PersistentVolumes"), or None."""
    words = title.split()
    if not 2 <= len(words) <= 3 or not all(w.isalpha() for w in words):
        return None
    if len(words_in_order(title)) != len(words):  # a stop word: no name ("How to")
        return None
    joined = tuple(terms("".join(words)))
    return joined if len(joined) == 1 and len(joined[0]) >= 8 else None


class TitleIndex:
    """The pack's page titles, for `match`. Built from (article id, title) pairs."""

    def __init__(self, titles: Iterable[tuple[str, str]]) -> None:
        by_words: dict[tuple[str, ...], list[str]] = {}
        by_joined: dict[tuple[str, ...], list[str]] = {}
        self._content: dict[tuple[str, ...], int] = {}  # title words → content word count
        self._written: dict[str, str] = {}  # article id → its title's tokens, padded
        for article_id, title in titles:
            words = tuple(terms(title or ""))
            self._written[article_id] = f" {' '.join(tokens(title or ''))} "
            content = len(words_in_order(title or ""))
            # A title with no content word ("How to", "1.0") names nothing.
            if words and content:
                by_words.setdefault(words, []).append(article_id)
                self._content[words] = content
            joined = _joined(title or "")
            if joined and joined not in by_words:  # "Persistent Volumes" as "PersistentVolumes"
                by_joined.setdefault(joined, []).append(article_id)
                self._content[joined] = 1
        self._titles = sum(len(ids) <= MAX_SHARED for ids in by_words.values())
        self._pages = {w: ids for w, ids in [*by_joined.items(), *by_words.items()]
                       if len(ids) <= MAX_SHARED}
        self._longest = max(map(len, self._pages), default=0)

    def __len__(self) -> int:
        return self._titles

    def match(self, question: str) -> list[str]:
        """Ids of the pages whose title the question names (see the module docstring),
        longest title first, at most MAX_MATCHES; [] when none."""
        words = terms(question)
        content = len(words_in_order(question))
        if not words or not content or not self._pages:
            return []
        found: dict[tuple[str, ...], None] = {}
        for size in range(min(self._longest, len(words)), 0, -1):
            for start in range(len(words) - size + 1):
                run = tuple(words[start:start + size])
                if run in self._pages and run not in found:
                    found[run] = None
        written = f" {' '.join(tokens(question))} "
        out: list[str] = []
        for run in found:  # longest first
            if self._content[run] >= MIN_SHARE * content:
                ids = self._pages[run]
                exact = [i for i in ids if self._written[i] in written]
                out.extend(i for i in exact or ids if i not in out)
        return out[:MAX_MATCHES]
