"""The routes (equivalence, epsilon and top-1, properties) and their commands: they run the
searches and the engine (``exactmax/engine/``), and hand every answer to the kernel."""
