"""Knowledge packs, query side: open a pack directory and search or ask it.

    from packs import KnowledgePack
    with KnowledgePack.open("out/kestrel") as pack:
        print(pack.ask("How are failed jobs retried?")["answer"])

Importing `packs` loads neither Prefect nor any build-only dependency. The first query
loads the pack's own query encoder (ONNX Runtime, packs/encoder.py): no torch, no
sentence-transformers, no model hub. The anthropic SDK loads only when a key is set.
"""

from packs.embedding import EmbeddingModelError
from packs.format import QUERY_MODULE_VERSION, PackFormatError
from packs.options import OptionsError, SearchOptions
from packs.pack import KnowledgePack
from packs.packset import PackSet
from packs.pipeline import QuestionError
from packs.result import RankedSection, SearchResult

__version__ = QUERY_MODULE_VERSION  # the format module owns the number

__all__ = [
    "EmbeddingModelError", "KnowledgePack", "OptionsError", "PackFormatError", "PackSet",
    "QuestionError", "RankedSection", "SearchOptions", "SearchResult", "__version__",
]
