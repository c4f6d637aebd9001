"""Counting a workload's work: what the start-up hook counts in unmodified scripts and what counting costs
them; the active phase the summaries cover. (README.md beside this file.)"""
