# One role per component. Every role may use SSM Session Manager (the
# replacement for SSH); only the app servers, and only when they run
# kv-cache, may touch DynamoDB: the actions the app issues, on the one table.

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
