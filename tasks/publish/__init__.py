"""Publishing a pack: `tables` writes its Parquet tables, `kuzu_store` loads them into the
Kuzu database, `atomic` assembles, verifies and swaps in a build folder, `guard` refuses a
clearly worse build, `lock` keeps one writer per pack.
"""
