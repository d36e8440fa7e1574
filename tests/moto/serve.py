"""moto as it is, on 127.0.0.1:PORT, behind the catalog cache (catalog_cache.py).

Usage: serve.py READY_FILE. Listens on a free port once moto's EC2 backend is loaded, then
writes its endpoint to READY_FILE; runs until killed.
"""

import os
import sys
import time

import catalog_cache
from moto.ec2.models import ec2_backends  # noqa: F401  (loaded before the first call, not in it)


def main() -> None:
    port = catalog_cache.serve(0, __file__)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(f"http://127.0.0.1:{port}\n")
    # Renamed into place: the reader never sees half an endpoint.
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
