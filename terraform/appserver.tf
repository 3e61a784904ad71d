# App servers: an autoscaling group in the private subnets running
# apps/kv-cache (with its own Redis) or apps/compute, chosen by var.app.
# They are reached only by the front ends (data) and the controller
# (control), never through the load balancer.
resource "aws_launch_template" "appserver" {
  name_prefix            = "${var.name}-appserver-"
  description            = "Chopper app server (${var.app})"
  image_id               = local.ami_id
  instance_type          = var.appserver_instance_type
  vpc_security_group_ids = [aws_security_group.appserver.id]
  user_data              = base64encode(local.appserver_user_data)
  update_default_version = true

  iam_instance_profile {
    arn = aws_iam_instance_profile.node["appserver"].arn
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  block_device_mappings {
    device_name = local.root_device_name

    ebs {
      volume_type           = "gp3"
      volume_size           = var.root_volume_size_gb
      encrypted             = true
      delete_on_termination = true
    }
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { Name = "${var.name}-appserver", Component = "appserver", App = var.app })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { Name = "${var.name}-appserver", Component = "appserver" })
  }
}

resource "aws_autoscaling_group" "appserver" {
  name                      = "${var.name}-appserver"
  min_size                  = var.appserver_count
  max_size                  = var.appserver_count
  desired_capacity          = var.appserver_count
  vpc_zone_identifier       = local.private_subnet_ids
  health_check_type         = "EC2"
  health_check_grace_period = var.boot_grace_period_seconds

  launch_template {
    id      = aws_launch_template.appserver.id
    version = aws_launch_template.appserver.latest_version
  }

  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 50
      instance_warmup        = var.boot_grace_period_seconds
    }
  }

  # kv-cache app servers need the table policy before their first request.
  depends_on = [aws_instance.controller, aws_iam_role_policy.appserver_dynamodb]
}
