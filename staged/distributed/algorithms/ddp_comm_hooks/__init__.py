"""``torch.distributed.algorithms.ddp_comm_hooks``: torch's DDP communication hooks. staged's
DDP averages its gradient buckets over MPI and has no ``register_comm_hook``; the modules
exist for the libraries that import them to check which state a user passed."""
