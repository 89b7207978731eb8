"""Extraction: sections in; entities, mentions, relationships and facts out.

`core` runs one shard's sections through Claude (`claude`, requests grouped by `batching`,
prompt in `prompt` with worked `examples`, answers validated by `schema`) or through the
offline heuristics (`offline`); `entities` resolves the entities of all shards into one set.
"""
