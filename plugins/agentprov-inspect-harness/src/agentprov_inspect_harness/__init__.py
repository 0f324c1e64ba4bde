"""The Inspect harness on T0's side: the ``inspect.eval`` mapper (an Inspect ``.eval`` log,
read by Inspect's own reader, to an AER of mode ``import``) and its wire-versus-eval check."""
