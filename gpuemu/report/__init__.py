"""Reports of a ``gpuemu check`` run: the one-file HTML report and the signed Kernel Correctness Report."""
