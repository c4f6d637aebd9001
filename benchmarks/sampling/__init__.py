"""What sampling the hardware costs the workload and the host: monitoring overhead, CPU per NVML call,
per sample and per thread, the 10 Hz floor; the GPU batches that measure them. (README.md beside this file.)"""
