"""torch.distributed.rpc.constants' values, as ferry.rpc uses them."""

# A call's default timeout, seconds (``rpc_timeout``; 0: none).
DEFAULT_RPC_TIMEOUT_SEC: float = 60.0
# A timeout argument left unset: the current default.
UNSET_RPC_TIMEOUT: float = -1.0
DEFAULT_INIT_METHOD: str = "env://"
DEFAULT_NUM_WORKER_THREADS: int = 16
# shutdown(timeout=0): wait for every worker as long as they are alive.
DEFAULT_SHUTDOWN_TIMEOUT: float = 0.0
