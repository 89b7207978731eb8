"""Publishing a pack: `kuzu_store` writes the tables and the Kuzu database, `atomic`
assembles, verifies and swaps in a build folder, `guard` refuses a clearly worse build,
`lock` keeps one writer per pack.
"""
