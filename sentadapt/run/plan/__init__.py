"""Planning a run before any weight loads: the settings of a request, the one config assembler, the checks,
the resolved run they hand on, the resume decision."""
