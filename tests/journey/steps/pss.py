"""Pod Security admission (kubernetes/pod-security-admission, policy/check_*.go at v0.33.0), the level
from the namespace's `pod-security.kubernetes.io/enforce` label. Checks modelled (the ones our pods can
trip): baseline -- privileged, host namespaces, hostPath volumes, added capabilities outside the
baseline set; restricted adds -- allowPrivilegeEscalation=false on every container, runAsNonRoot=true
(pod or every container), runAsUser != 0, capabilities drop ALL (add at most NET_BIND_SERVICE),
seccompProfile RuntimeDefault/Localhost (pod or every container). The refusal reads like the API
server's: `violates PodSecurity "restricted:latest": <check> (<detail>)`."""

from __future__ import annotations

from typing import Any

from . import StepResult, containers

BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def _baseline(pod: dict[str, Any]) -> list[str]:
    spec, problems = pod["spec"], []
    if any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")):
        problems.append("host namespaces")
    if any("hostPath" in v for v in spec.get("volumes", [])):
        problems.append("hostPath volumes")
    for c in containers(pod):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f'privileged (container "{c["name"]}" must not set securityContext.privileged=true)')
        added = set((sc.get("capabilities") or {}).get("add", [])) - BASELINE_CAPS
        if added:
            problems.append(f'non-default capabilities (container "{c["name"]}" must not include {sorted(added)})')
    return problems


def _restricted(pod: dict[str, Any]) -> list[str]:
    psc, problems = pod["spec"].get("securityContext") or {}, []
    # Since 1.25 the Linux-only checks (escalation, capabilities, seccomp) skip pods with spec.os.name windows
    # (policy/check_*_restricted.go, v0.33.0).
    linux = ((pod["spec"].get("os") or {}).get("name") or "linux") != "windows"
    for c in containers(pod):
        sc, name = c.get("securityContext") or {}, c["name"]
        if linux and sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f'allowPrivilegeEscalation != false (container "{name}" must set '
                            "securityContext.allowPrivilegeEscalation=false)")
        caps = sc.get("capabilities") or {}
        if linux and "ALL" not in caps.get("drop", []):
            problems.append(f'unrestricted capabilities (container "{name}" must set '
                            'securityContext.capabilities.drop=["ALL"])')
        if linux and set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f'unrestricted capabilities (container "{name}" adds more than NET_BIND_SERVICE)')
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            problems.append(f'runAsNonRoot != true (container "{name}" must set securityContext.runAsNonRoot=true)')
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            problems.append(f'runAsUser=0 (container "{name}" must not set runAsUser=0)')
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if linux and seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f'seccompProfile (container "{name}" must set securityContext.seccompProfile.type '
                            'to "RuntimeDefault" or "Localhost")')
    return problems


def admit(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    labels = fleet.namespace(host_pod["metadata"]["namespace"])["metadata"]["labels"]
    level = labels.get("pod-security.kubernetes.io/enforce", "privileged")
    problems = [] if level == "privileged" else _baseline(host_pod)
    if level == "restricted":
        problems += _restricted(host_pod)
    if problems:
        return StepResult(False, f'pods "{host_pod["metadata"]["name"]}" is forbidden: violates PodSecurity '
                          f'"{level}:latest": ' + ", ".join(problems), host_pod, {"level": level})
    return StepResult(True, f"Pod Security {level}: allowed", host_pod, {"level": level})
