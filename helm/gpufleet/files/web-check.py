# `helm test`: the portal answers and the API is mounted and refuses anonymous callers, through the Service.
import os
import sys
import urllib.error
import urllib.request

base, host = os.environ["GPUFLEET_CHECK_URL"].rstrip("/"), os.environ["GPUFLEET_CHECK_HOST"]
if not base.startswith(("http://", "https://")):
    sys.exit(f"GPUFLEET_CHECK_URL must be http(s): {base!r}")


def status(path):
    # As the ingress forwards it: TLS ended there (X-Forwarded-Proto), else production redirects to https.
    request = urllib.request.Request(base + path, headers={"Host": host, "X-Forwarded-Proto": "https"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - scheme checked above
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


checks = {"/login/": 200, "/api/v1/tenants/": 401}
failed = {path: got for path, want in checks.items() if (got := status(path)) != want}
print("gpufleet web check:", "ok" if not failed else f"unexpected answers {failed} (wanted {checks})")
sys.exit(1 if failed else 0)
