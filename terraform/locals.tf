# Values derived from variables only. Nothing here may refer to a resource or
# a data source: the offline test evaluates this file with `terraform console`
# next to variables.tf, without providers.

locals {
  tags = merge({ Project = "chopper", Deployment = var.name }, var.tags)

  create_vpc = var.existing_vpc_id == null
  kv_cache   = var.app == "kv-cache"

  load_driver_count = var.load_driver_enabled ? 1 : 0

  # SSH needs both a key pair and source ranges; either missing keeps it off.
  ssh_ingress_cidrs = var.ssh_key_name == null ? [] : var.ssh_cidr_blocks

  # Only zones offering every type we launch are used for the created VPC.
  instance_types = distinct(concat(
    [var.frontend_instance_type, var.appserver_instance_type, var.controller_instance_type],
    var.load_driver_enabled ? [var.load_driver_instance_type] : []
  ))

  # One IAM role (and instance profile) per component. Every component but
  # the load driver signs control calls, so reads the cluster token.
  cluster_token_roles = toset(["controller", "frontend", "appserver"])
  node_roles          = setunion(local.cluster_token_roles, var.load_driver_enabled ? ["load-driver"] : [])

  # Parameter Store name of the cluster token (cluster-token.tf).
  cluster_token_parameter = "/${var.name}/cluster-token"

  # The controllers' state table (dynamodb.tf), named after the deployment
  # so that two deployments can share an account.
  controller_state_table_name = "${var.name}-controller-state"

  # Each kv-cache app server talks to its own redis-server on loopback (paper 6.1).
  redis_url = "redis://127.0.0.1:6379"

  # DynamoDB actions the kv-cache app issues (apps/kv-cache/dynamo-store.js),
  # minus CreateTable: Terraform owns the table, so the app only finds it
  # ACTIVE. The offline test keeps this list in step with the code.
  kv_cache_dynamodb_actions = [
    "dynamodb:DescribeTable",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
  ]

  # DynamoDB actions the controllers' state store and leader election issue
  # (controller/state-store.js), minus CreateTable for the same reason. The
  # offline test keeps this list in step with the code too.
  controller_state_dynamodb_actions = [
    "dynamodb:DeleteItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
  ]

  # Rendered into every instance's user_data by templates/common.sh.tftpl.
  common_template_vars = {
    node_major  = var.node_major_version
    git_repo    = var.source_git_repo == null ? "" : var.source_git_repo
    git_ref     = var.source_git_ref
    tarball_url = var.source_tarball_url == null ? "" : var.source_tarball_url
  }
}
