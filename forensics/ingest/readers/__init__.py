"""The readers' room: each reader of a file's lines as a pair with one name, its Python beside its C."""
