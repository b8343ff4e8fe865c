"""semhuff's version, in a module of its own: ``semhuff/__init__`` exports it and
``numba_cache`` names its cache folder by it, without either importing the other."""
__version__ = "0.1.0"
