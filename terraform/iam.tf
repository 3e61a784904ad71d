# One role per component. Every role may use SSM Session Manager (the
# replacement for SSH). Beyond that each gets only what its code calls:
# - the controllers: the state table (leader lease, assignment, membership);
# - the app servers, only when they run kv-cache: the kv table;
# - controllers, front ends and app servers: the cluster token parameter.
# Every grant names its one resource; none uses a wildcard.

data "aws_iam_policy_document" "ec2_assume_role" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  for_each = local.node_roles

  name               = "${var.name}-${each.key}"
  description        = "Chopper ${each.key} instances"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume_role.json
}

resource "aws_iam_role_policy_attachment" "ssm" {
  for_each = local.node_roles

  role       = aws_iam_role.node[each.key].name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  for_each = local.node_roles

  name = "${var.name}-${each.key}"
  role = aws_iam_role.node[each.key].name
}

# --- kv-cache's table --------------------------------------------------------

data "aws_iam_policy_document" "appserver_dynamodb" {
  statement {
    sid       = "KvCacheTableOnly"
    actions   = local.kv_cache_dynamodb_actions
    resources = [aws_dynamodb_table.kv.arn]
  }
}

resource "aws_iam_role_policy" "appserver_dynamodb" {
  count = local.kv_cache ? 1 : 0

  name   = "dynamodb-kv-table"
  role   = aws_iam_role.node["appserver"].id
  policy = data.aws_iam_policy_document.appserver_dynamodb.json
}

# --- The controllers' state table ----------------------------------------------

data "aws_iam_policy_document" "controller_state" {
  statement {
    sid       = "ControllerStateTableOnly"
    actions   = local.controller_state_dynamodb_actions
    resources = [aws_dynamodb_table.controller_state.arn]
  }
}

resource "aws_iam_role_policy" "controller_state" {
  name   = "dynamodb-controller-state"
  role   = aws_iam_role.node["controller"].id
  policy = data.aws_iam_policy_document.controller_state.json
}

# --- The cluster token -----------------------------------------------------------

data "aws_iam_policy_document" "cluster_token_read" {
  statement {
    sid       = "ReadClusterToken"
    actions   = ["ssm:GetParameter"]
    resources = [aws_ssm_parameter.cluster_token.arn]
  }
}

resource "aws_iam_role_policy" "cluster_token" {
  for_each = local.cluster_token_roles

  name   = "ssm-cluster-token"
  role   = aws_iam_role.node[each.key].id
  policy = data.aws_iam_policy_document.cluster_token_read.json
}

# AmazonSSMManagedInstanceCore allows ssm:GetParameter(s) on every parameter
# in the account, and aws/ssm decrypts for any principal in it. The load
# driver needs no token, so an explicit deny keeps it from reading one.
data "aws_iam_policy_document" "cluster_token_deny" {
  statement {
    sid       = "NoClusterToken"
    effect    = "Deny"
    actions   = ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParameterHistory"]
    resources = [aws_ssm_parameter.cluster_token.arn]
  }
}

resource "aws_iam_role_policy" "load_driver_no_cluster_token" {
  count = local.load_driver_count

  name   = "deny-ssm-cluster-token"
  role   = aws_iam_role.node["load-driver"].id
  policy = data.aws_iam_policy_document.cluster_token_deny.json
}
