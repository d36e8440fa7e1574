"""moto as it is, on 127.0.0.1:PORT, behind the catalog cache (catalog_cache.py).

Usage: serve.py PORT. Listens once moto's EC2 backend is loaded; runs until killed.
"""

import sys
import time

import catalog_cache
from moto.ec2.models import ec2_backends  # noqa: F401  (loaded before the first call, not in it)


def main() -> None:
    catalog_cache.serve(int(sys.argv[1]), __file__)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
