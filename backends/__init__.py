"""Search backends shipped with toolsearch, each registered through the
``toolsearch.backends`` entry-point group like any third-party backend."""
