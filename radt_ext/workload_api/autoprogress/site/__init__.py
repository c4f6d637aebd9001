"""The folder the session puts first on an unmodified workload's PYTHONPATH: its `sitecustomize.py` is
radt-ext's start-up hook (Python runs it at start-up because of where it lies, not as this package's
module). A package only so that every install ships it: a wheel, `pip install .`, `pip install --target`
and an editable install all hold the folder. Nothing here is imported by radt-ext.
"""
