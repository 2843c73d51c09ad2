from django.urls import path
from django.views.generic import RedirectView

from scheduling.fleetops import cluster_pages
from scheduling.pending import pages as pending_pages
from scheduling.simulation import pages as simulate_pages

from . import admin_pages, pages
from .nodehealth import pages as nodehealth_pages

app_name = "scheduling"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="scheduling:flavors", permanent=False), name="index"),
    path("flavors/", pages.flavors, name="flavors"),
    path("node-pools/new/", admin_pages.node_pool_create, name="node-pool-create"),
    path("tenants/<slug:slug>/", pages.tenant_gpu, name="tenant-gpu"),
    path("tenants/<slug:slug>/quota/", admin_pages.quota_set, name="quota-set"),
    path("tenants/<slug:slug>/workloads/", pending_pages.workloads, name="tenant-workloads"),
    path("node-health/", nodehealth_pages.health, name="node-health"),
    path("node-health/<str:node>/uncordon/", nodehealth_pages.uncordon_node, name="node-uncordon"),
    path("requests/", pages.requests, name="requests"),
    path("clusters/", cluster_pages.clusters, name="clusters"),
    path("clusters/<slug:name>/", cluster_pages.cluster_detail, name="cluster-detail"),
    path("queue/", cluster_pages.queue, name="queue"),
    path("simulate/", simulate_pages.simulate, name="simulate"),
    path("simulate/<int:pk>/", simulate_pages.simulation, name="simulation"),
    path("endpoints/<int:pk>/plan/", simulate_pages.plan_autoscaling, name="plan-autoscaling"),
    path("requests/<int:pk>/", pages.request_detail, name="request-detail"),
    path("requests/<int:pk>/approve/", pages.request_review, {"verdict": "approve"}, name="request-approve"),
    path("requests/<int:pk>/reject/", pages.request_review, {"verdict": "reject"}, name="request-reject"),
]
