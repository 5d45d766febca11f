"""Upstream Cluster API v1.13's KubeadmControlPlane and KubeadmConfig webhooks (controlplane/kubeadm/internal/
webhooks, bootstrap/kubeadm/internal/webhooks, KubeadmConfigSpec.Validate) as pure functions, as in core.py."""

from __future__ import annotations

import copy
import re
from typing import Any

from capd_py.api import features
from capd_py.api.admission import checks
from capd_py.api.admission.core import Gates, _d, _get, enabled, machine_naming_errors, machine_taint_errors
from capd_py.api.admission.fielderrors import FieldError, forbidden, invalid, required

DEFAULT_CA_CERTIFICATES_EXPIRY_DAYS = 3650  # upstream secret.DefaultCACertificatesExpiryDays
_OCI_TAG_BAD = re.compile(r"[^-a-zA-Z0-9_.]")
_SEMVER_TOLERANT = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")

# upstream's list of what may change on a KCP update (everything under metadata, and these); a change anywhere
# else is "cannot be modified". `*` matches any rest of the path.
KCP_MUTABLE_PATHS: tuple[tuple[str, ...], ...] = tuple(tuple(p.split(".")) for p in (
    "metadata.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.etcd", "spec.kubeadmConfigSpec.clusterConfiguration.etcd.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local",
    "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.etcd.external.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.dns", "spec.kubeadmConfigSpec.clusterConfiguration.dns.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.imageRepository",
    "spec.kubeadmConfigSpec.clusterConfiguration.featureGates",
    "spec.kubeadmConfigSpec.clusterConfiguration.featureGates.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.apiServer",
    "spec.kubeadmConfigSpec.clusterConfiguration.apiServer.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.controllerManager",
    "spec.kubeadmConfigSpec.clusterConfiguration.controllerManager.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.scheduler",
    "spec.kubeadmConfigSpec.clusterConfiguration.scheduler.*",
    "spec.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays",
    "spec.kubeadmConfigSpec.clusterConfiguration.encryptionAlgorithm",
    "spec.kubeadmConfigSpec.initConfiguration.nodeRegistration",
    "spec.kubeadmConfigSpec.initConfiguration.nodeRegistration.*",
    "spec.kubeadmConfigSpec.initConfiguration.patches.directory",
    "spec.kubeadmConfigSpec.initConfiguration.patches",
    "spec.kubeadmConfigSpec.initConfiguration.skipPhases",
    "spec.kubeadmConfigSpec.initConfiguration.bootstrapTokens",
    "spec.kubeadmConfigSpec.initConfiguration.localAPIEndpoint",
    "spec.kubeadmConfigSpec.initConfiguration.localAPIEndpoint.*",
    "spec.kubeadmConfigSpec.initConfiguration.timeouts", "spec.kubeadmConfigSpec.initConfiguration.timeouts.*",
    "spec.kubeadmConfigSpec.joinConfiguration.nodeRegistration",
    "spec.kubeadmConfigSpec.joinConfiguration.nodeRegistration.*",
    "spec.kubeadmConfigSpec.joinConfiguration.patches.directory",
    "spec.kubeadmConfigSpec.joinConfiguration.patches",
    "spec.kubeadmConfigSpec.joinConfiguration.skipPhases",
    "spec.kubeadmConfigSpec.joinConfiguration.caCertPath",
    "spec.kubeadmConfigSpec.joinConfiguration.controlPlane",
    "spec.kubeadmConfigSpec.joinConfiguration.controlPlane.*",
    "spec.kubeadmConfigSpec.joinConfiguration.discovery", "spec.kubeadmConfigSpec.joinConfiguration.discovery.*",
    "spec.kubeadmConfigSpec.joinConfiguration.timeouts", "spec.kubeadmConfigSpec.joinConfiguration.timeouts.*",
    "spec.kubeadmConfigSpec.bootCommands", "spec.kubeadmConfigSpec.preKubeadmCommands",
    "spec.kubeadmConfigSpec.postKubeadmCommands", "spec.kubeadmConfigSpec.files", "spec.kubeadmConfigSpec.verbosity",
    "spec.kubeadmConfigSpec.users", "spec.kubeadmConfigSpec.ntp", "spec.kubeadmConfigSpec.ntp.*",
    "spec.kubeadmConfigSpec.ignition", "spec.kubeadmConfigSpec.ignition.*",
    "spec.kubeadmConfigSpec.diskSetup", "spec.kubeadmConfigSpec.diskSetup.*",
    "spec.kubeadmConfigSpec.format", "spec.kubeadmConfigSpec.mounts",
    "spec.machineTemplate.metadata", "spec.machineTemplate.metadata.*",
    "spec.machineTemplate.spec", "spec.machineTemplate.spec.*",
    "spec.replicas", "spec.version", "spec.remediation", "spec.remediation.*",
    "spec.machineNaming", "spec.machineNaming.*", "spec.rollout", "spec.rollout.*",
))


def default_kubeadmcontrolplane(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    spec = _d(out, "spec")
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if not str(spec.get("version") or "").startswith("v"):
        spec["version"] = "v" + str(spec.get("version") or "")
    strategy = _d(spec, "rollout", "strategy")
    strategy["type"] = "RollingUpdate"
    _d(strategy, "rollingUpdate").setdefault("maxSurge", 1)
    return out


def _external_etcd(spec: dict[str, Any] | None) -> bool:
    return bool(_get(spec, "kubeadmConfigSpec", "clusterConfiguration", "etcd", "external"))


def kcp_spec_errors(spec: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """validateKubeadmControlPlaneSpec."""
    errs: list[FieldError] = []
    replicas = spec.get("replicas")
    if replicas is None:
        errs.append(required("spec.replicas", "is required"))
    elif replicas <= 0:
        errs.append(forbidden("spec.replicas", "cannot be less than or equal to 0"))
    if replicas is not None and not _external_etcd(spec) and replicas % 2 == 0:
        errs.append(forbidden("spec.replicas", "cannot be an even number when etcd is stacked"))
    ref = _get(spec, "machineTemplate", "spec", "infrastructureRef") or {}
    for part in ("apiGroup", "kind", "name"):
        if not ref.get(part):
            errs.append(invalid(f"spec.machineTemplate.infrastructure.{part}", "", "cannot be empty"))
    errs += machine_taint_errors(_get(spec, "machineTemplate", "spec", "taints"), "spec.machineTemplate.spec.taints",
                                 enabled(gates, features.MACHINE_TAINT_PROPAGATION))
    errs += checks.object_meta_errors(_get(spec, "machineTemplate", "metadata"), "spec.machineTemplate.metadata")
    version = str(spec.get("version") or "")
    if not checks.KUBE_SEMVER.match(version):
        errs.append(invalid("spec.version", version, "must be a valid semantic version"))
    errs += _rollout_and_cert_validity(spec)
    errs += machine_naming_errors(spec.get("machineNaming"), "spec.machineNaming")
    return errs


def _rollout_and_cert_validity(spec: dict[str, Any], prefix: str = "spec") -> list[FieldError]:
    errs: list[FieldError] = []
    strategy = _get(spec, "rollout", "strategy") or {}
    if strategy:
        if strategy.get("type") != "RollingUpdate":
            errs.append(required(f"{prefix}.rollout.strategy.type", "only RollingUpdate is supported"))
        surge = _get(strategy, "rollingUpdate", "maxSurge")
        if surge is not None:
            surge_int = checks.int_value(surge)
            if surge_int == 0 and (spec.get("replicas") or 0) < 3 and spec.get("replicas") is not None:
                errs.append(required(f"{prefix}.rollout.strategy.rollingUpdate", "when KubeadmControlPlane is "
                                     "configured to scale-in, replica count needs to be at least 3"))
            if surge_int not in (0, 1):
                errs.append(required(f"{prefix}.rollout.strategy.rollingUpdate.maxSurge", "value must be 1 or 0"))
    config = _get(spec, "kubeadmConfigSpec", "clusterConfiguration") or {}
    days, ca_days = config.get("certificateValidityPeriodDays") or 0, config.get("caCertificateValidityPeriodDays") or 0
    path = f"{prefix}.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays"
    if days:
        if ca_days and days > ca_days:
            errs.append(invalid(path, days,
                                f"must be less than or equal to caCertificateValidityPeriodDays ({ca_days})"))
        elif not ca_days and days > DEFAULT_CA_CERTIFICATES_EXPIRY_DAYS:
            errs.append(invalid(path, days, "must be less than or equal to the default value of "
                                            f"caCertificateValidityPeriodDays ({DEFAULT_CA_CERTIFICATES_EXPIRY_DAYS})"))
        before = _get(spec, "rollout", "before", "certificatesExpiryDays") or 0
        if before and before >= days:
            errs.append(invalid(f"{prefix}.rollout.before.certificatesExpiryDays", before,
                                f"must be less than certificateValidityPeriodDays ({days})"))
    return errs


def cluster_configuration_errors(old: dict[str, Any] | None, new: dict[str, Any] | None,
                                 base: str = "spec.kubeadmConfigSpec.clusterConfiguration") -> list[FieldError]:
    """validateClusterConfiguration."""
    new = new or {}
    errs: list[FieldError] = []
    dns_tag = str(_get(new, "dns", "imageTag") or "")
    if _OCI_TAG_BAD.search(dns_tag):
        errs.append(forbidden(f"{base}.dns.imageTag", f"tag {dns_tag} is invalid"))
    if dns_tag and not _SEMVER_TOLERANT.match(dns_tag):
        # upstream names this field without its prefix
        errs.append(invalid("dns.imageTag", dns_tag, f"failed to parse CoreDNS version: {dns_tag} is not a version"))
    local, external = _get(new, "etcd", "local"), _get(new, "etcd", "external")
    etcd_tag = str(_get(new, "etcd", "local", "imageTag") or "")
    if local and _OCI_TAG_BAD.search(etcd_tag):
        errs.append(forbidden(f"{base}.etcd.local.imageTag", f"tag {etcd_tag} is invalid"))
    if local and external:
        errs.append(forbidden(f"{base}.etcd.local", "cannot have both external and local etcd"))
    if old is not None and bool(external) != bool(_get(old, "etcd", "external")):
        errs.append(forbidden(f"{base}.etcd.external", "cannot change between external and local etcd"))
    return errs


def kubeadm_config_spec_errors(spec: dict[str, Any] | None, path: str, is_kcp: bool,
                               gates: Gates | None = None) -> list[FieldError]:
    """KubeadmConfigSpec.Validate: files and users (one source each, secret name and key, unique file paths),
    ignition (its feature gate, what it cannot do), disk layouts, the discovery kubeconfig's user, and (KCP) the
    same control plane health check timeout for init and join."""
    spec = spec or {}
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, f in enumerate(spec.get("files") or []):
        source = f.get("contentFrom")
        if f.get("content") and source:
            errs.append(invalid(f"{path}.files[{i}]", f, "only one of content or contentFrom may be specified for a "
                                                         "single file"))
        if source:
            errs += _secret_ref(source, f"{path}.files[{i}].contentFrom")
        if f.get("path") in seen:
            errs.append(invalid(f"{path}.files[{i}].path", f, "path property must be unique among all files"))
        seen.add(f.get("path"))
    for i, u in enumerate(spec.get("users") or []):
        source = u.get("passwdFrom")
        if u.get("passwd") and source:
            errs.append(invalid(f"{path}.users[{i}]", u, "only one of passwd or passwdFrom may be specified for a "
                                                         "single user"))
        if source:
            errs += _secret_ref(source, f"{path}.users[{i}].passwdFrom")
    errs += _ignition_errors(spec, path, gates)
    for i, p in enumerate(_get(spec, "diskSetup", "partitions") or []):
        layout = p.get("diskLayout") if isinstance(p, dict) else None
        if isinstance(layout, list) and layout:
            total = sum(int(x.get("percentage") or 0) for x in layout if isinstance(x, dict))
            if total > 100:
                errs.append(invalid(f"{path}.diskSetup.partitions[{i}].diskLayout", total,
                                    "the sum of all partition percentages must not be greater than 100"))
    user = _get(spec, "joinConfiguration", "discovery", "file", "kubeConfig", "user") or {}
    if user.get("authProvider") and user.get("exec"):
        errs.append(invalid(f"{path}.joinConfiguration.discovery.file.kubeconfig.user", user,
                            "only one of authProvider or exec must be defined"))
    if is_kcp:
        t_init = _get(spec, "initConfiguration", "timeouts", "controlPlaneComponentHealthCheckSeconds")
        t_join = _get(spec, "joinConfiguration", "timeouts", "controlPlaneComponentHealthCheckSeconds")
        if t_init != t_join:
            a, b = ("unset" if t is None else str(t) for t in (t_init, t_join))
            detail = ("controlPlaneComponentHealthCheckSeconds must be set to the same value both in "
                      f"initConfiguration.timeouts ({a}) and in joinConfiguration.timeouts ({b})")
            field = "timeouts.controlPlaneComponentHealthCheckSeconds"
            errs.append(invalid(f"{path}.initConfiguration.{field}", a, detail))
            errs.append(invalid(f"{path}.joinConfiguration.{field}", b, detail))
    return errs


IGNITION = "ignition"
_GATE_OFF = "can be set only if the KubeadmBootstrapFormatIgnition feature gate is enabled"
_NOT_WITH_IGNITION = 'not supported when spec.format is set to: "ignition"'


def _ignition_errors(spec: dict[str, Any], path: str, gates: Gates | None) -> list[FieldError]:
    """validateIgnition: the format and its settings need the KubeadmBootstrapFormatIgnition gate; with it, what
    Ignition cannot express is refused."""
    fmt, ignition = spec.get("format"), spec.get("ignition")
    if not enabled(gates, features.KUBEADM_BOOTSTRAP_FORMAT_IGNITION):
        errs = [forbidden(f"{path}.format", _GATE_OFF)] if fmt == IGNITION else []
        return errs + ([forbidden(f"{path}.ignition", _GATE_OFF)] if ignition else [])
    if fmt != IGNITION:
        return [invalid(f"{path}.format", fmt or "", 'must be set to "ignition" if spec.ignition is set')] \
            if ignition else []
    errs = [forbidden(f"{path}.users[{i}].inactive", _NOT_WITH_IGNITION)
            for i, u in enumerate(spec.get("users") or []) if isinstance(u, dict) and u.get("inactive") is True]
    errs += [forbidden(f"{path}.files[{i}].encoding", _NOT_WITH_IGNITION)
             for i, f in enumerate(spec.get("files") or [])
             if isinstance(f, dict) and f.get("encoding") in ("gzip", "gzip+base64")]
    if spec.get("bootCommands") is not None:
        errs.append(forbidden(f"{path}.bootCommands", _NOT_WITH_IGNITION))
    for i, p in enumerate(_get(spec, "diskSetup", "partitions") or []):
        table = p.get("tableType") if isinstance(p, dict) else None
        if table and table != "gpt":
            errs.append(invalid(f"{path}.diskSetup.partitions[{i}].tableType", table,
                                'only partition type "gpt" is supported when spec.format is set to "ignition"'))
    for i, fs in enumerate(_get(spec, "diskSetup", "filesystems") or []):
        if isinstance(fs, dict):
            errs += [forbidden(f"{path}.diskSetup.filesystems[{i}].{k}", _NOT_WITH_IGNITION)
                     for k in ("replaceFS", "partition") if fs.get(k)]
    return errs


def _secret_ref(source: dict[str, Any], path: str) -> list[FieldError]:
    secret = source.get("secret") or {}
    errs = []
    if not secret.get("name"):
        errs.append(required(f"{path}.secret.name", "secret file source must specify non-empty secret name"))
    if not secret.get("key"):
        errs.append(required(f"{path}.secret.key", "secret file source must specify non-empty secret key"))
    return errs


def _pruned(value: Any) -> Any:
    """What Go's omitempty/omitzero marshalling would leave: no nulls, empty objects or empty lists."""
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def merge_patch_paths(old: Any, new: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The leaf paths of the JSON merge patch from `old` to `new` (jsonpatch.CreateMergePatch + upstream's paths())."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new else [prefix]
    out: list[tuple[str, ...]] = []
    for key in sorted(set(old) | set(new)):
        if key not in new or key not in old:
            if isinstance(new.get(key), dict) and key not in old:
                out += merge_patch_paths({}, new[key], (*prefix, key)) or [(*prefix, key)]
            else:
                out.append((*prefix, key))
        elif old[key] != new[key]:
            out += merge_patch_paths(old[key], new[key], (*prefix, key))
    return out


def _allowed(path: tuple[str, ...]) -> bool:
    for allowed in KCP_MUTABLE_PATHS:
        matched = True
        for i, part in enumerate(path):
            if i >= len(allowed):
                matched = False
                break
            if allowed[i] == "*":
                break
            if part != allowed[i]:
                matched = False
                break
        else:
            matched = len(path) >= len(allowed)
        if matched:
            return True
    return False


def _minor(version: str) -> tuple[int, int] | None:
    m = _SEMVER_TOLERANT.match(version.strip())
    return None if m is None else (int(m.group(1)), int(m.group(2) or 0))


def validate_kubeadmcontrolplane(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    spec = new.get("spec") or {}
    errs = kcp_spec_errors(spec, gates)
    new_config = _get(spec, "kubeadmConfigSpec", "clusterConfiguration")
    if old is None:
        errs += cluster_configuration_errors(None, new_config)
    else:
        a, b = _pruned({k: v for k, v in old.items() if k != "status"}), _pruned(
            {k: v for k, v in new.items() if k != "status"})
        for path in merge_patch_paths(a, b):
            if path and not _allowed(path):
                errs.append(forbidden(".".join(path), "cannot be modified"))
        previous, wanted = str(_get(old, "spec", "version") or ""), str(spec.get("version") or "")
        frm, to = _minor(previous), _minor(wanted)
        if frm is not None and to is not None and to >= (frm[0], frm[1] + 2):
            errs.append(forbidden("spec.version", f"cannot update Kubernetes version from {previous} to {wanted}"))
        errs += cluster_configuration_errors(_get(old, "spec", "kubeadmConfigSpec", "clusterConfiguration"),
                                             new_config)
    errs += kubeadm_config_spec_errors(spec.get("kubeadmConfigSpec"), "spec.kubeadmConfigSpec", is_kcp=True,
                                       gates=gates)
    return errs


def validate_kubeadmcontrolplanetemplate(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """Create: the template's spec as a KCP's (rollout, certificate validity, naming, taints, metadata, cluster
    configuration, KubeadmConfigSpec). Update: spec.template.spec is immutable (an emptied rollout strategy that
    was upstream's default counts as unchanged, as upstream)."""
    base = "spec.template.spec"
    spec = _get(new, "spec", "template", "spec") or {}
    if old is not None:
        before, after = _pruned(_get(old, "spec", "template", "spec") or {}), _pruned(copy.deepcopy(spec))
        old_strategy = _get(before, "rollout", "strategy") or {}
        if not _get(after, "rollout", "strategy") and old_strategy.get("type") == "RollingUpdate" and \
                _get(old_strategy, "rollingUpdate", "maxSurge") == 1:
            after.setdefault("rollout", {})["strategy"] = old_strategy
        if before == after:
            return []
        changed = ", ".join(".".join(p) for p in merge_patch_paths(before, after)[:5])
        return [invalid(base, new.get("spec", {}).get("template"), "KubeadmControlPlaneTemplate spec.template.spec "
                        f"field is immutable. Please create new resource instead. Diff: {changed}")]
    if not enabled(gates, features.CLUSTER_TOPOLOGY):
        return [forbidden("spec", "can be set only if the ClusterTopology feature flag is enabled")]
    errs = _rollout_and_cert_validity({**spec, "replicas": None}, base)
    errs += machine_naming_errors(spec.get("machineNaming"), f"{base}.machineNaming")
    errs += machine_taint_errors(_get(spec, "machineTemplate", "spec", "taints"), f"{base}.machineTemplate.spec.taints",
                                 enabled(gates, features.MACHINE_TAINT_PROPAGATION))
    errs += checks.object_meta_errors(_get(spec, "machineTemplate", "metadata"), f"{base}.machineTemplate.metadata")
    errs += cluster_configuration_errors(None, _get(spec, "kubeadmConfigSpec", "clusterConfiguration"),
                                         f"{base}.kubeadmConfigSpec.clusterConfiguration")
    errs += kubeadm_config_spec_errors(spec.get("kubeadmConfigSpec"), f"{base}.kubeadmConfigSpec", is_kcp=True,
                                       gates=gates)
    errs += checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata")
    return errs


def validate_kubeadmconfig(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    return kubeadm_config_spec_errors(new.get("spec"), "spec", is_kcp=False, gates=gates)


def default_kubeadmconfigtemplate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """upstream's KubeadmConfigTemplate defaulting webhook changes nothing outside the topology controller's dry
    runs; it exists, so a template of the wrong JSON types is refused by its decoder (400) as upstream's is."""
    return obj


def validate_kubeadmconfigtemplate(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """upstream's KubeadmConfigTemplate webhook: the template's spec, then its metadata (ObjectMeta.Validate)."""
    return (kubeadm_config_spec_errors(_get(new, "spec", "template", "spec"), "spec.template.spec", is_kcp=False,
                                       gates=gates)
            + checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata"))


def scale_denial(kcp: dict[str, Any] | None, replicas: int) -> str | None:
    """The KCP scale webhook's refusal of a `scale` subresource write (None: allowed)."""
    if replicas == 0:
        return "replicas cannot be 0"
    if not _external_etcd((kcp or {}).get("spec")) and replicas % 2 == 0:
        return "replicas cannot be an even number when etcd is stacked"
    return None

