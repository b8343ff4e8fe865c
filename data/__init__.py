"""The project's data folder, installed as ``semhuff._data`` so that every install can read the
manifest (``manifest.csv``); the data sets themselves are never here (README.md)."""
