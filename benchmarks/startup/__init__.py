"""Start-up: how soon `radt-ext run` starts a workload and returns, README command 1 on a fresh store,
the recipes' start-up and their variants. (README.md beside this file.)"""
