"""A Hydrazine client that is not ours: Python stubs generated from proto/ by Debian's
protoc and grpc_python_plugin, used as any Python program would. Run by
test/api/python-client.test.ts against a running Hydrazine, with the generated modules
on PYTHONPATH and HZ_ADDR, HZ_TOKEN in the environment. Prints one JSON object: what it
observed, for the test to check.
"""

import json
import os
import sys

import grpc
from google.protobuf import timestamp_pb2  # noqa: F401 (resources_pb2 needs it loaded)
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1 import reflection_pb2, reflection_pb2_grpc
from hydrazine.v1 import hydrazine_pb2, hydrazine_pb2_grpc, ipam_pb2, resources_pb2

ADDR = os.environ["HZ_ADDR"]
AUTH = (("authorization", f"Bearer {os.environ['HZ_TOKEN']}"),)
DEADLINE_S = 60


def status_details(error):
    """The google.rpc.Status a failed call carries in grpc-status-details-bin."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None


def main():
    seen = {}
    channel = grpc.insecure_channel(ADDR)
    api = hydrazine_pb2_grpc.HydrazineServiceStub(channel)

    health = health_pb2_grpc.HealthStub(channel)
    checked = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    seen["health"] = health_pb2.HealthCheckResponse.ServingStatus.Name(checked.status)

    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="*")]), timeout=10
    )
    seen["services"] = sorted(
        s.name for a in answers for s in a.list_services_response.service
    )

    group = resources_pb2.ResourceGroupSpec(
        tenant_id="tenant-py",
        network=resources_pb2.Network(cidr="10.60.0.0/24", gateway="10.60.0.1"),
        network6=resources_pb2.Network(cidr="fd00:60::/64", gateway="fd00:60::1"),
    )
    applied = api.ApplyResourceGroup(
        hydrazine_pb2.ApplyResourceGroupRequest(name="group-py", spec=group),
        metadata=AUTH,
        timeout=10,
    )
    seen["group"] = {
        "name": applied.resource_group.name,
        "tenant": applied.resource_group.spec.tenant_id,
        "job": applied.HasField("job_id"),
    }

    bad = resources_pb2.ResourceGroupSpec(
        tenant_id="tenant-py",
        network=resources_pb2.Network(cidr="10.61.0.1/33", gateway="10.61.0.1"),
    )
    try:
        api.ApplyResourceGroup(
            hydrazine_pb2.ApplyResourceGroupRequest(name="group-bad", spec=bad),
            metadata=AUTH,
            timeout=10,
        )
        seen["bad"] = "accepted"
    except grpc.RpcError as error:
        status = status_details(error)
        violations, reason = [], None
        for detail in status.details if status else []:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad_request = error_details_pb2.BadRequest()
                detail.Unpack(bad_request)
                violations += [
                    {"field": v.field, "description": v.description}
                    for v in bad_request.field_violations
                ]
            elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reason = f"{info.domain}/{info.reason}"
        seen["bad"] = {
            "code": error.code().name,
            "violations": violations,
            "reason": reason,
        }

    # Watch the host from before it exists until it is Ready.
    watch = api.Watch(
        hydrazine_pb2.WatchRequest(
            kind=hydrazine_pb2.OBJECT_KIND_MANAGED_RESOURCE, name="host-py"
        ),
        metadata=AUTH,
        timeout=DEADLINE_S,
    )
    events = iter(watch)
    first = next(events)
    seen["first_event"] = hydrazine_pb2.WatchEventType.Name(first.type)

    host = resources_pb2.ManagedResourceSpec(
        resource_group="group-py",
        host_mac="52:54:00:00:60:01",
        dpu=resources_pb2.DpuPlacement(id="dpu-py", ips=["172.18.0.60", "172.18.0.160"]),
        host_access=resources_pb2.HOST_ACCESS_FABRIC_ACCESS,
    )
    api.ApplyManagedResource(
        hydrazine_pb2.ApplyManagedResourceRequest(name="host-py", spec=host),
        metadata=AUTH,
        timeout=10,
    )
    phases = []
    for event in events:
        if not event.HasField("managed_resource"):
            continue
        phase = resources_pb2.ManagedResourcePhase.Name(event.managed_resource.status.phase)
        phases.append(phase)
        if phase == "MANAGED_RESOURCE_PHASE_READY":
            seen["ready"] = {
                "resource_version": event.resource_version,
                "fabric_ip": event.managed_resource.status.host_access_ips.fabric_ip,
                "host_ipv6": event.managed_resource.status.host_access_ips.host_ipv6,
                "configs_synced": event.managed_resource.status.configs_synced,
                "host_access": resources_pb2.HostAccess.Name(
                    event.managed_resource.spec.host_access
                ),
                "created_at_s": event.managed_resource.created_at.seconds,
            }
            break
    watch.cancel()
    seen["phases"] = phases

    ipam = api.GetResourceGroupIpam(
        ipam_pb2.GetResourceGroupIpamRequest(name="group-py"), metadata=AUTH, timeout=10
    )
    seen["ipam"] = {
        "subnets": [{"cidr": s.cidr, "used": s.used} for s in ipam.subnets],
        "owners": sorted(a.owner for a in ipam.allocations),
    }

    json.dump(seen, sys.stdout)


if __name__ == "__main__":
    main()
