"""/api/v1/members/: tenant memberships as resources (what Terraform's gpufleet_tenant_member manages).

Natural key: tenant slug + username (`?tenant=&user=` filters). Owners and admins of the tenant (and
platform admins) grant, change and remove; every member sees the tenant's memberships. Writes go
through tenants.actions. A tenant owner or admin adds only people who already share a tenant with them
(platform admins: anyone who has signed in); a username that does not exist and one the caller may not see
get the same 400, so the endpoint does not enumerate usernames.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.viewsets import ScopedViewSetMixin
from gpufleet.core.errors import ActionError

from .. import actions
from ..models import Membership, Tenant, can_manage
from .serializers import MemberSerializer, MemberUpdateSerializer, MemberWriteSerializer


def _may_see(caller: object, user: object) -> bool:
    """Platform admins see every user; everyone else the members of the tenants they see."""
    if is_platform_admin(caller):
        return True
    return Membership.objects.filter(user=user, tenant__in=Tenant.objects.for_user(caller)).exists()


FILTERS = [OpenApiParameter("tenant", OpenApiTypes.STR, description="tenant slug"),
           OpenApiParameter("user", OpenApiTypes.STR, description="username")]


@extend_schema_view(list=extend_schema(parameters=FILTERS))
class MemberViewSet(ScopedViewSetMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.CreateModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin,
                    viewsets.GenericViewSet):
    queryset = Membership.objects.select_related("tenant", "user")
    serializer_class = MemberSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = self.queryset.filter(tenant__in=Tenant.objects.for_user(self.request.user)).order_by("pk")
        params = self.request.query_params
        if params.get("tenant"):
            qs = qs.filter(tenant__slug=params["tenant"])
        if params.get("user"):
            qs = qs.filter(user__username=params["user"])
        return qs

    def _require_manager(self, tenant: Tenant) -> None:
        if not can_manage(self.request.user, tenant):
            raise PermissionDenied("only the tenant's owners and admins, or platform admins, may do this")

    def _answer(self, membership: Membership, code: int = status.HTTP_200_OK) -> Response:
        return Response(MemberSerializer(self.get_queryset().get(pk=membership.pk)).data, status=code)

    @extend_schema(request=MemberWriteSerializer, responses={201: MemberSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = MemberWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        tenant = Tenant.objects.for_user(request.user).filter(slug=data["tenant"]).first()
        if tenant is None:
            raise NotFound("no such tenant")
        self._require_manager(tenant)
        user = get_user_model().objects.filter(username=data["user"]).first()
        if user is None or not _may_see(request.user, user):
            # One answer for a username that does not exist and one the caller may not see: POST /members/
            # must not tell a tenant admin which usernames exist on the platform (issue 27).
            raise ActionError({"user": [
                f"no user {data['user']!r} you can add: users appear after their first sign-in, and tenant "
                "owners and admins add people who already share a tenant with them (others join through the "
                "identity provider's group or are added by a platform admin)"]})
        if Membership.objects.filter(tenant=tenant, user=user).exists():
            # A 400 on the field, not a 409: nothing will change if the client retries.
            raise ActionError({"user": [f"'{data['user']}' is already a member of '{tenant.slug}'"]})
        return self._answer(actions.add_member(tenant, user, data["role"], by=request.user), status.HTTP_201_CREATED)

    @extend_schema(request=MemberUpdateSerializer, responses={200: MemberSerializer})
    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        membership = self.get_object()
        self._require_manager(membership.tenant)
        payload = MemberUpdateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return self._answer(actions.change_member_role(membership, payload.validated_data["role"], by=request.user))

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        membership = self.get_object()
        self._require_manager(membership.tenant)
        actions.remove_member(membership, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
