"""``torch.distributed.elastic``: what a training script launched by torchrun imports from
it, ``multiprocessing.errors.record``.  The elastic agent itself (restarts, rendezvous) is
not modelled: ``kernbench run --nproc-per-node N`` starts the ranks."""
