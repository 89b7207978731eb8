"""The build's LLM layer over the shared `packs.llm`: `layers` (cache → retry → rate limit →
provider, one call), `guards` (what may start a call), `store` (response cache and cost
ledger), `batches` (the Message Batches API), `failures` (what a stage catches).
"""
